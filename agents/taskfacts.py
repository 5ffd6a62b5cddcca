"""Facts about a task's inputs for the prompts: what forward receives, and in which layout.

The task source shows `get_inputs()`, but a model reading `torch.randn(B, D, S).transpose(1, 2)`
has to work out that the softmax dim of x then has stride S, and the layout decides the kernel
(level2/14: a `.contiguous()` copy first cost 4x against reading x in its storage order). So the
prompts state it: each input's shape, dtype at the run's dtype, and strides when it is not
contiguous, drawn on the meta device (nothing allocated, whatever the sizes).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from ..codegen.layout import storage_order, stride_order
from ..sandbox.static.pyparse import serialised
from ..sandbox.task import Task, as_dtype, task_namespace


@functools.lru_cache(maxsize=64)
def input_lines(task: Task, dtype: str) -> tuple[str, ...]:
    """One line per forward input (floats cast to `dtype`); () when get_inputs cannot run on
    the meta device (numpy, host-only tensors): the prompts then say nothing about layouts."""
    try:
        ns = task_namespace(task)
        # serialised: the first meta-tensor op imports torch._dynamo, which parses (pyparse)
        with serialised(), torch.device("meta"):
            inputs = list(ns["get_inputs"]())
        names = _forward_names(ns["Model"])
        run_dtype = as_dtype(dtype)
    except Exception:  # a task error, or inputs that need a real device: no facts
        return ()
    lines = []
    for i, x in enumerate(inputs):
        name = names[i] if i < len(names) else f"input {i}"
        lines.append(f"`{name}`: {describe(x, run_dtype)}")
    return tuple(lines)


def describe(x: Any, run_dtype: torch.dtype) -> str:
    if not isinstance(x, torch.Tensor):
        return f"{x!r} ({type(x).__name__})"
    dtype = run_dtype if x.is_floating_point() else x.dtype
    head = f"{tuple(x.shape)} {str(dtype).removeprefix('torch.')}"
    if x.is_contiguous():
        return f"{head}, contiguous"
    stride = tuple(x.stride())
    if 0 in stride:
        return f"{head}, strides {stride}: an expanded view (dims of stride 0 repeat one value)"
    order = storage_order(x.shape, stride)
    if order is None and x.numel() == 0:  # an empty tensor: no element to leave a gap
        order = stride_order(stride)
    if order is not None:
        return (
            f"{head}, strides {stride}: not contiguous, a permuted view of a tensor stored in "
            f"dim order {order} (.contiguous() would copy it)"
        )
    return f"{head}, strides {stride}: not contiguous (a slice: rows have gaps)"


def _forward_names(model: type) -> list[str]:
    params = list(inspect.signature(model.forward).parameters.values())[1:]  # after self
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
