"""The candidate contract, in one place: the dtypes a task runs at, the precision policies, and
what a candidate may import.

The CLI's choices, EvalConfig and RunConfig, the static check (static.py), the export's
standalone check and the coder's prompt all take these from here, so they cannot disagree.
The names cost no torch import here (`torch_dtypes()` imports torch when called), so the
CLI can offer them as choices before anything heavy is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    import torch

# The dtypes a task's model and floating inputs are cast to (as KernelBench does).
DType = Literal["fp32", "fp16", "bf16"]
DTYPE_NAMES: tuple[DType, ...] = get_args(DType)

# strict: fp32 must be fp32-accurate; tf32-ok: TF32 is acceptable (see compare.py's floors).
PrecisionPolicy = Literal["strict", "tf32-ok"]
PRECISION_POLICIES: tuple[PrecisionPolicy, ...] = get_args(PrecisionPolicy)

# The modules a candidate may import, in the order the rules and the prompt list them. The
# static check allows these roots and their submodules (triton.language.extra, ...).
ALLOWED_IMPORTS: tuple[str, ...] = (
    "torch",
    "triton",
    "triton.language",
    "math",
    "typing",
    "functools",
    "itertools",
    "operator",
    "dataclasses",
    "collections",
    "enum",
    "numbers",
    "__future__",
)
ALLOWED_ROOTS: frozenset[str] = frozenset(name.partition(".")[0] for name in ALLOWED_IMPORTS)


def torch_dtypes() -> dict[str, torch.dtype]:
    """fp32/fp16/bf16 -> the torch dtype."""
    import torch

    return dict(zip(DTYPE_NAMES, (torch.float32, torch.float16, torch.bfloat16), strict=True))
