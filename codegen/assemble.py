"""Put a candidate file together: imports, tunables, helpers, each group's kernels and launcher,
the task's helper classes, then ModelNew."""

from __future__ import annotations

import re

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
) -> str:
    helpers: list[str] = []
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
    code_blocks += helper_classes
    code_blocks.append(model_new)
    body = "\n".join(line for b in code_blocks for line in b)
    imports = []
    if re.search(r"\bmath\.", body):
        imports.append("import math")
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
