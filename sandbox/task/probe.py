"""A task at some sizes on the meta device: the bytes of its inputs and parameters, and whether
it still builds and runs there (nothing is allocated). What vary.py and shrink.py measure with.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..static.pyparse import serialised
from .metashapes import quick_rnns
from .parse import Size, Slot, Task, _with_slots, task_namespace


def input_bytes(task: Task, sizes: Mapping[str, Size] | None = None) -> int:
    """Bytes of get_inputs() at `sizes` with floating tensors at fp32, measured on meta."""
    ns = task_namespace(task, sizes)
    with serialised(), torch.device("meta"):
        return _tensor_bytes(ns["get_inputs"]())


@dataclass(frozen=True)
class _Probe:
    """The task at some sizes on the meta device."""

    bytes: int  # inputs, plus parameters and buffers when built, floating ones at fp32
    built: bool  # Model(*get_init_inputs()) was constructed
    ran: bool  # and its forward ran
    # The names of its parameters and buffers when built: the model's modules. A constant that
    # changes them (ResNet's `layers = [3, 4, 23, 3]`, a number of stages) makes another
    # network, not the same one at other sizes.
    modules: tuple[str, ...] = ()

    def as_valid_as(self, base: _Probe) -> bool:
        """Whatever worked at the task's own sizes works here too, on the same network."""
        return (
            (self.built or not base.built)
            and (self.ran or not base.ran)
            and self.same_modules(base)
        )

    def same_modules(self, base: _Probe) -> bool:
        """The same network as `base` (where both were built; unknown otherwise: True)."""
        return not (self.built and base.built) or self.modules == base.modules


def sizes_key(sizes: Mapping[str, Size]) -> str:
    """One setting of a task's sizes as a dict key (the probes' caches)."""
    return json.dumps(dict(sizes), sort_keys=True)


class _Prober:
    """`_probe` of one task, each setting of its sizes probed once."""

    def __init__(self, task: Task):
        self.task = task
        self.seen: dict[str, _Probe | None] = {}

    def probe(self, sizes: Mapping[str, Size]) -> _Probe | None:
        key = sizes_key(sizes)
        if key not in self.seen:
            self.seen[key] = _probe(self.task, sizes)
        return self.seen[key]

    def slots(self, values: Mapping[Slot, int]) -> _Probe | None:
        return self.probe(_with_slots(self.task.sizes, values))


def _probe(task: Task, sizes: Mapping[str, Size]) -> _Probe | None:
    """The task at `sizes` on meta, or None when even get_inputs() fails there."""
    with serialised():  # the first meta-tensor op imports torch._dynamo, which parses (pyparse)
        return _probe_unlocked(task, sizes)


def _probe_unlocked(task: Task, sizes: Mapping[str, Size]) -> _Probe | None:
    try:
        ns = task_namespace(task, sizes)
        with torch.device("meta"):
            inputs = list(ns["get_inputs"]())
    except Exception:
        return None
    total = _tensor_bytes(inputs)
    try:
        with torch.device("meta"):
            model = ns["Model"](*ns["get_init_inputs"]())
    except Exception:
        return _Probe(total, built=False, ran=False)
    total += _tensor_bytes([*model.parameters(), *model.buffers()])
    modules = tuple(sorted(name for name, _ in [*model.named_parameters(), *model.named_buffers()]))
    try:
        with torch.no_grad(), quick_rnns(model):
            model(*inputs)
    except Exception:
        return _Probe(total, built=True, ran=False, modules=modules)
    return _Probe(total, built=True, ran=True, modules=modules)


def _tensor_bytes(values: Any) -> int:
    """Bytes of the tensors in `values` (nested lists/tuples), floating ones counted at fp32."""
    if isinstance(values, (list, tuple)):
        return sum(_tensor_bytes(v) for v in values)
    if not isinstance(values, torch.Tensor):
        return 0
    size = 4 if values.is_floating_point() else values.element_size()
    return values.numel() * size
