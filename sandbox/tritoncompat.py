"""Differences between the supported Triton versions that the evaluator irons out.

Triton 3.6's interpreter turns a tensor into a Python int (`range(pid, n, step)`, indexing a
list by a program id) with `int(ndarray)` on the tensor's one-element array. NumPy 2.4 refuses
that ("only 0-dimensional arrays can be converted to Python scalars"), so on triton 3.6 with a
current NumPy every kernel whose loop bounds are runtime arguments or program ids raises under
the interpreter, and an honest candidate would be judged a crash on a CPU machine. Triton 3.7
squeezes the array first. Measured on the H200 image (triton 3.6.0) on 2026-12-01.
"""

from __future__ import annotations

import os

_MARK = "_kernelwright_scalar_index"


def _scalar_index(self) -> int:
    # .item() takes the one element of an array of any rank, and refuses a block, as 3.7 does.
    return int(self.handle.data.item())


def fix_interpreter_index() -> bool:
    """Under TRITON_INTERPRET=1, make the interpreter's `tensor.__index__` read the single element
    with `.item()` on every Triton version (3.7's own behaviour). Idempotent; returns whether the
    interpreter's tensor patch is now wrapped. Call it before the first kernel is interpreted."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - every supported Triton has it
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:  # pragma: no cover - a future Triton; its own __index__ stands
        return False
    if getattr(original, _MARK, False):
        return True

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _scalar_index)

    setattr(patch_lang_tensor, _MARK, True)
    patch_lang_tensor.__wrapped__ = original  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True
