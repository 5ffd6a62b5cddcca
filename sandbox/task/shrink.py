"""Sizes under which a task's inputs and parameters fit a byte budget (the CPU interpreter's)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..static.pyparse import serialised
from .parse import (
    MIN_SIZE,
    Size,
    Slot,
    Task,
    TaskError,
    _sizes_text,
    _slot_values,
    _with_slots,
    task_namespace,
)
from .probe import _Probe, _Prober, sizes_key

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
    Where meta cannot build or run the task (an `.item()` in `__init__`) and the task does not
    run at the sizes so found, it is shrunk again with each step run on the CPU (`_CpuProber`):
    a step that breaks it (a Swin fixed at img_size=224 fed 28x28 images) is not taken.
    """
    prober = _Prober(task)
    base = prober.probe(task.sizes)
    if base is None:
        raise TaskError(
            f"{task.path}: get_inputs() fails on the meta device at {_sizes_text(task.sizes)}, "
            "so its inputs cannot be measured for shrinking"
        )
    sizes = _shrink(prober, base, max_input_bytes)
    cpu = _CpuProber(prober, max_input_bytes)
    if (base.built and base.ran) or sizes == task.sizes or cpu.runs(sizes):
        return sizes
    return _shrink(cpu, base, max_input_bytes)


def _shrink(prober, base: _Probe, max_input_bytes: int) -> dict[str, Size]:
    sizes = dict(prober.task.sizes)
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


# A step is run on the CPU only where its inputs (measured on meta) stay under this many times the
# budget; a larger one is taken on meta's word, and the smaller steps after it are run.
CPU_CHECK_FACTOR = 64


def runs_on_cpu(task: Task, sizes: Mapping[str, Size]) -> bool:
    """Model(*get_init_inputs()) builds on the CPU at `sizes` and its forward runs there."""
    try:
        ns = task_namespace(task, sizes)
        with serialised(), torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = ns["Model"](*ns["get_init_inputs"]())
            model(*ns["get_inputs"]())
    except Exception:
        return False
    return True


class _CpuProber:
    """A _Prober whose sizes count as valid only where the task also runs on the CPU there."""

    def __init__(self, meta: _Prober, max_input_bytes: int):
        self.task = meta.task
        self.meta = meta
        self.cap = CPU_CHECK_FACTOR * max_input_bytes
        self.ran: dict[str, bool] = {}

    def runs(self, sizes: Mapping[str, Size]) -> bool:
        """runs_on_cpu, once per setting of the sizes."""
        key = sizes_key(sizes)
        if key not in self.ran:
            self.ran[key] = runs_on_cpu(self.task, sizes)
        return self.ran[key]

    def probe(self, sizes: Mapping[str, Size]) -> _Probe | None:
        found = self.meta.probe(sizes)
        if found is None or found.bytes > self.cap:
            return found
        return found if self.runs(sizes) else None


def _shrink_step(prober, sizes, base: _Probe, floor: int, frozen: set[Slot]):
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
