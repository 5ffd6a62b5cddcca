"""A call's outputs as both sides see them: their leaves with paths, and whether two share storage.

The candidate's process names where each output lies with these; the judge's comparison
(judge/compare.py, which re-exports them) walks the same leaves.
"""

from __future__ import annotations

from typing import Any

import torch


def flatten_outputs(out: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """Leaves of a (nested) output with their paths: [("out[0]", t0), ("out[1][2]", x), ...]."""
    if isinstance(out, (tuple, list)):
        return [leaf for i, v in enumerate(out) for leaf in flatten_outputs(v, f"{prefix}[{i}]")]
    if isinstance(out, dict):
        return [leaf for k, v in out.items() for leaf in flatten_outputs(v, f"{prefix}[{k!r}]")]
    return [(prefix, out)]


def storages_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the storages under `a` and `b` share any byte (views of one buffer do)."""
    if a.device != b.device or a.device.type == "meta":
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()
