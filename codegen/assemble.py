"""Put a candidate file together: imports, tunables, helpers, each group's kernels and launcher,
the task's helper classes, then ModelNew."""

from __future__ import annotations

import ast
import re

from ..sandbox.static.pyparse import parse
from . import ops
from .group_writer import Emitted
from .pysrc import drop_dead, fit, join_lines, ruff_formatted
from .tunables import declaration

HEADER = '''"""Candidate written by kernelwright's offline fusion codegen (no LLM).

Each fused group of the task's forward is one Triton kernel (or one pipeline of kernels) with a
launcher; ModelNew keeps the task's parameters and calls the launchers. Module-level constants
marked `# tune:` are launch parameters a sweep may change.
"""'''


def assemble(
    emitted: list[Emitted],
    helper_classes: list[list[str]],
    model_new: list[str],
    dtype: str,
    needs: list[str] | None = None,
) -> str:
    """`needs`: ops.HELPERS the helper classes call (recurrent.py's kernel calls _tanh)."""
    emitted, renames = _shared(emitted)
    for old, new in renames.items():
        model_new = [re.sub(rf"\b{re.escape(old)}\(", f"{new}(", line) for line in model_new]
    helpers: list[str] = list(needs or [])
    for e in emitted:
        for h in ops.helpers_for(set()) + sorted(e.helpers):
            for dep in ops.HELPER_DEPS.get(h, ()):
                if dep not in helpers:
                    helpers.append(dep)
            if h not in helpers:
                helpers.append(h)
    tunables: list[str] = []
    for e in emitted:
        tunables += [t for t in e.tunables if t not in tunables]
    blocks: list[list[str]] = [HEADER.splitlines()]
    code_blocks: list[list[str]] = []
    code_blocks += [ops.HELPERS[h].rstrip("\n").splitlines() for h in helpers]
    for e in emitted:
        code_blocks += [[x for line in drop_dead(list(b)) for x in fit(line)] for b in e.blocks]
    # The standard-library imports the copied helpers use (pyforward.init_source: a block of
    # import lines alone) go with the file's imports.
    stdlib = [b for b in helper_classes if b and all(_is_import(x) for x in b)]
    code_blocks += [b for b in helper_classes if not (b and all(_is_import(x) for x in b))]
    code_blocks.append(model_new)
    body = "\n".join(line for b in code_blocks for line in b)
    imports = sorted({x for b in stdlib for x in b} - {"import math"}, key=_import_key)
    if re.search(r"\bmath\.", body):
        imports = sorted([*imports, "import math"], key=_import_key)
    if imports:
        imports.append("")
    imports += ["import torch", "import torch.nn as nn"]
    if re.search(r"\bF\.", body):
        imports.append("import torch.nn.functional as F")
    imports += ["import triton", "import triton.language as tl"]
    blocks.append(imports)
    if tunables:
        decl: list[str] = []
        for t in tunables:
            decl += declaration(t, dtype)
        blocks.append(decl)
    source = "\n".join(blocks[0]) + "\n\n" + "\n".join(blocks[1]) + "\n\n"
    source += join_lines(blocks[2:] + code_blocks)
    return ruff_formatted(source)


def _is_import(line: str) -> bool:
    return line.startswith(("import ", "from "))


def _import_key(line: str) -> tuple[bool, str]:
    """isort's order within a section (ruff's default): `import x` lines, then `from x`, each
    by the module's name."""
    words = line.split()
    return (words[0] == "from", words[1])


def _shared(emitted: list[Emitted]) -> tuple[list[Emitted], dict[str, str]]:
    """The groups whose code is another group's up to the names it defines (the 80 batch norms
    of a ResNet, over other channel counts: sizes are launch arguments) written once: the kept
    groups, and the launcher each dropped one's calls go to instead. Launchers are called with
    positional arguments, so a renamed parameter changes nothing."""
    kept: list[Emitted] = []
    first: dict[str, str] = {}
    renames: dict[str, str] = {}
    for e in emitted:
        key = _shape_of(e.blocks)
        if key is None or key not in first:
            if key is not None:
                first[key] = e.launcher
            kept.append(e)
        else:
            renames[e.launcher] = first[key]
    return kept, renames


def _shape_of(blocks: list[list[str]]) -> str | None:
    """The blocks' code with every name they define (functions, parameters, locals) replaced by
    its order of first use, docstrings and comments dropped: equal for two groups exactly when
    one is the other renamed. None when the code does not parse on its own."""
    try:
        tree = parse("\n".join(line for b in blocks for line in b))
    except SyntaxError:
        return None
    defined: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            defined.add(n.name)
        elif isinstance(n, ast.arg):
            defined.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            defined.add(n.id)
    order: dict[str, str] = {}

    def canonical(name: str) -> str:
        return order.setdefault(name, f"v{len(order)}") if name in defined else name

    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            n.name = canonical(n.name)
            body = n.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                n.body = body[1:] or [ast.Pass()]
        elif isinstance(n, ast.arg):
            n.arg = canonical(n.arg)
        elif isinstance(n, ast.Name):
            n.id = canonical(n.id)
        elif isinstance(n, ast.keyword) and n.arg is not None:
            n.arg = canonical(n.arg)
    return ast.dump(tree)
