"""Sizes under which a task's inputs and parameters fit a byte budget (the CPU interpreter's)."""

from __future__ import annotations

from .parse import MIN_SIZE, Size, Slot, Task, TaskError, _sizes_text, _slot_values, _with_slots
from .probe import _Probe, _Prober

# -- shrinking for the CPU interpreter -------------------------------------------------------------
# Constants up to KEEP_SMALL (kernel sizes, strides, groups, heads, small channel counts) are kept:
# they fix what the task computes and cost few bytes. Larger ones are halved in round-robin, the
# least-shrunk first, which keeps their ratios within a factor of 2 and keeps powers of two (and
# divisibility by small factors) intact; first not below KEEP_SMALL (16 keeps tl.dot's minimum
# tile of 16 usable), then, if the budget is still out of reach, down to MIN_SIZE.
KEEP_SMALL = 16


def shrink_overrides(task: Task, max_input_bytes: int = 2**20) -> dict[str, Size]:
    """Sizes (a full dict) under which the task's inputs and parameters fit `max_input_bytes`.

    Footprints are measured on the meta device (nothing is allocated): get_inputs() plus the
    parameters and buffers of Model(*get_init_inputs()), floating tensors counted at fp32. A step
    is kept only if the task still builds (and, where its forward runs on meta at the default
    sizes, still runs forward) at the new sizes. Each size of a tuple constant shrinks on its own.
    """
    sizes = dict(task.sizes)
    prober = _Prober(task)
    base = prober.probe(sizes)
    if base is None:
        raise TaskError(
            f"{task.path}: get_inputs() fails on the meta device at {_sizes_text(sizes)}, "
            "so its inputs cannot be measured for shrinking"
        )
    footprint = base.bytes
    for floor in (KEEP_SMALL, MIN_SIZE):
        frozen: set[Slot] = set()
        while footprint > max_input_bytes:
            step = _shrink_step(prober, sizes, base, floor, frozen)
            if step is None:
                break
            sizes, footprint = step
        if footprint <= max_input_bytes:
            break
    return sizes


def _shrink_step(prober: _Prober, sizes, base: _Probe, floor: int, frozen: set[Slot]):
    """The next valid halving (new sizes, footprint) of the least-shrunk size, or None."""
    original = _slot_values(prober.task, prober.task.sizes)
    current = _slot_values(prober.task, sizes)
    order = sorted(
        (s for s in current if original[s] > KEEP_SMALL and current[s] > floor and s not in frozen),
        key=lambda s: (-current[s] / original[s], -current[s]),
    )
    for s in order:
        trial = _with_slots(sizes, {s: max(floor, current[s] // 2)})
        probe = prober.probe(trial)
        if probe is not None and probe.as_valid_as(base):
            return trial, probe.bytes
        frozen.add(s)
    return None
