"""The envelope a task's kernel was verified for, from the task file and the evaluator's record
(the size constants of each shape it checked, the run's dtype): what `export --guard` writes in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..sandbox.static.pyparse import serialised
from ..sandbox.task import as_dtype, load_task, task_namespace
from .envelope import Envelope


def task_envelope(
    task_path: str | Path,
    shapes: Sequence[Mapping[str, Any]],
    dtype: str | torch.dtype,
    device: str | None,
) -> Envelope:
    """The envelope of get_inputs() at each of `shapes` (size constants), floating inputs in
    `dtype`, on `device` ("cuda", "cpu"; None: any). Drawn on the meta device: nothing is
    allocated, whatever the sizes. A dimension that differed between the shapes is "any"."""
    task = load_task(task_path)
    target = as_dtype(dtype)
    examples = []
    for sizes in shapes or [task.sizes]:
        ns = task_namespace(task, dict(sizes))
        with serialised(), torch.device("meta"):
            examples.append([_on_meta(x, target) for x in ns["get_inputs"]()])
    return Envelope.from_examples(examples, device=device)


def _on_meta(x: Any, dtype: torch.dtype) -> Any:
    """`x` as the evaluator hands it over (floating tensors cast to the run's dtype, strides
    kept), on meta."""
    if not isinstance(x, torch.Tensor):
        return x
    target = dtype if x.is_floating_point() else x.dtype
    return torch.empty_strided(x.shape, x.stride(), dtype=target, device="meta")
