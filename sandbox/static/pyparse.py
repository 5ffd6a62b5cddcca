"""ast.parse and compile() of an AST behind one process-wide lock.

CPython 3.11's conversion between its C AST and Python AST objects keeps its recursion depth in
per-interpreter state, so two threads parsing at once can fail with "SystemError: AST constructor
recursion depth mismatch" (seen here: a suite's two jobs static-checking candidates at the same
moment). Every parse in kernelwright goes through these two functions.

Libraries parse too: inspect.signature of a builtin parses its text signature (LangGraph's graph
builder does that), and so do lazy imports (torch._dynamo on the first arithmetic on a meta
tensor: 58 parses; matplotlib). A suite job hit the race that way on 2026-12-01 ("before=39,
after=63", one job's run start against the other's meta-device tracing). Code of ours that runs
such library code in a suite job's thread holds the same lock through `serialised()`; the lock
is re-entrant, so our own parses inside such a block proceed.
"""

from __future__ import annotations

import ast
import contextlib
import threading
from collections.abc import Iterator
from types import CodeType

_LOCK = threading.RLock()


@contextlib.contextmanager
def serialised() -> Iterator[None]:
    """Hold the parse lock around library code that may parse Python itself."""
    with _LOCK:
        yield


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse(source, filename), serialised."""
    with _LOCK:
        return ast.parse(source, filename=filename)


def compile_tree(tree: ast.Module, filename: str, **kwargs) -> CodeType:
    """compile(tree, filename, "exec"), serialised (AST objects are converted back to C)."""
    with _LOCK:
        return compile(tree, filename, "exec", **kwargs)


def compile_source(source: str, filename: str, **kwargs) -> CodeType:
    """compile(source, filename, "exec") of source text, serialised like every other parse."""
    with serialised():
        return compile(source, filename, "exec", **kwargs)
