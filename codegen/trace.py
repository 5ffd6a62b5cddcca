"""Trace a task's Model with torch.fx and record every node's shape and dtype.

Modules from torch.nn stay calls (conv, pooling, norms, activations: the normaliser decides which
of them it generates); the task's own submodules are traced through. Shapes come from running the
graph on meta tensors at the task's real sizes, so nothing is allocated however large the task is.
"""

from __future__ import annotations

import linecache
import traceback
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from ..sandbox.metashapes import quick_rnns


class Unsupported(Exception):
    """The model has no offline candidate; the message says why, in one line."""


class LeafTracer(fx.Tracer):
    """fx's tracer with every torch.nn module (except containers) kept as one call, and the
    task's own buffers as graph values: a causal mask sliced by the sequence length it reads
    from x.size() (`self.bias[:, :, :T, :T]`) traces instead of failing on a proxy index."""

    proxy_buffer_attributes = True

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        if isinstance(m, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
            return False
        return m.__module__.startswith("torch.nn")


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...] = ()  # as traced: a task's input may be a permuted view


def build_model(ns: dict[str, Any], dtype: torch.dtype) -> tuple[nn.Module, list[Any]]:
    """Model(*get_init_inputs()) and get_inputs() on the meta device, floats cast to `dtype`."""
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = list(ns["get_inputs"]())
    model = model.to(dtype)
    inputs = [
        x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
    ]
    return model, inputs


def trace(model: nn.Module, path: str) -> fx.GraphModule:
    """The fx graph of model.forward, or Unsupported with the line that stopped the tracer."""
    try:
        graph = LeafTracer().trace(model)
    except Exception as e:  # fx raises many types (TraceError, TypeError, ...): all mean "no"
        raise Unsupported(f"torch.fx cannot trace Model.forward ({_why(e, path)})") from e
    return fx.GraphModule(model, graph)


def propagate(gm: fx.GraphModule, inputs: list[Any], path: str) -> dict[str, Any]:
    """Each node's value summarised: TensorInfo, a Python scalar, or a tuple of those."""
    recorder = _Recorder(gm)
    try:
        with quick_rnns(gm):  # recurrent modules' shapes from their sizes (torch steps them)
            recorder.run(*inputs)
    except Exception as e:
        raise Unsupported(f"running Model.forward on meta tensors failed ({_why(e, path)})") from e
    return recorder.infos


class _Recorder(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.infos: dict[str, Any] = {}

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        self.infos[n.name] = summarise(result)
        return result


def summarise(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorInfo(tuple(value.shape), value.dtype, tuple(value.stride()))
    if isinstance(value, (tuple, list)):
        return tuple(summarise(v) for v in value)
    if isinstance(value, torch.Size):
        return tuple(value)
    return value


def _why(e: BaseException, path: str) -> str:
    """The first line of an exception, with the task line it came from when there is one."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    first = first[:160]
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename == path:
            code = (frame.line or linecache.getline(path, frame.lineno)).strip()
            return f"{first}; at line {frame.lineno}: {code}"
    return first
