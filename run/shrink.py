"""The sizes a task runs at without CUDA: shrunk for the Triton interpreter unless the person set
them (--shape), and the one line that says which sizes were used and why."""

from __future__ import annotations

from collections.abc import Mapping

from ..sandbox.task import Size, Task, shrink_overrides
from .config import CPU_INPUT_BYTES


def interpreter_sizes(
    task: Task, given: Mapping[str, Size], max_bytes: int = CPU_INPUT_BYTES
) -> tuple[dict[str, Size], str]:
    """(the size overrides to run at, a note saying so) for a machine without CUDA.

    The person's --shape wins over the shrink: `given` is kept as it is. Otherwise the constants
    the shrink changed (shrink_overrides) are returned, possibly none.
    """
    if given:
        return dict(given), "no CUDA: Triton interpreter, correctness only (sizes from --shape)"
    sizes = shrink_overrides(task, max_bytes)
    changed = {k: v for k, v in sizes.items() if task.sizes.get(k) != v}
    if not changed:
        return {}, "no CUDA: Triton interpreter, correctness only (task sizes kept)"
    text = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
    was = ", ".join(f"{k}={task.sizes[k]}" for k in sorted(changed))
    return changed, (
        f"no CUDA: Triton interpreter, correctness only; task shrunk to {text} (from {was}); "
        "--shape NAME=VALUE sets the sizes instead"
    )
