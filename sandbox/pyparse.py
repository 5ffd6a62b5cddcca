"""ast.parse and compile() of an AST behind one process-wide lock.

CPython 3.11's conversion between its C AST and Python AST objects keeps its recursion depth in
per-interpreter state, so two threads parsing at once can fail with "SystemError: AST constructor
recursion depth mismatch" (seen here: a suite's two jobs static-checking candidates at the same
moment). Every parse in kernelwright goes through these two functions.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse(source, filename), serialised."""
    with _LOCK:
        return ast.parse(source, filename=filename)


def compile_tree(tree: ast.Module, filename: str, **kwargs) -> CodeType:
    """compile(tree, filename, "exec"), serialised (AST objects are converted back to C)."""
    with _LOCK:
        return compile(tree, filename, "exec", **kwargs)
