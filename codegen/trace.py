"""Trace a task's Model with torch.fx and record every node's shape and dtype.

Modules from torch.nn stay calls (conv, pooling, norms, activations: the normaliser decides which
of them it generates); the task's own submodules are traced through. Shapes come from running the
graph on meta tensors at the task's real sizes, so nothing is allocated however large the task is.
"""

from __future__ import annotations

import contextlib
import linecache
import traceback
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from ..errors import KernelwrightError
from ..sandbox.task.metashapes import quick_rnns


class Unsupported(KernelwrightError):
    """The model has no offline candidate; the message says why, in one line."""

    fault = "task"


class LeafTracer(fx.Tracer):
    """fx's tracer with every torch.nn module (except containers) kept as one call, and the
    task's own buffers as graph values: a causal mask sliced by the sequence length it reads
    from x.size() (`self.bias[:, :, :T, :T]`) traces instead of failing on a proxy index."""

    proxy_buffer_attributes = True

    def __init__(self, inputs: list[Any] | None = None) -> None:
        super().__init__()
        self.inputs = inputs
        self.decisions: list[bool] = []  # each condition decided on the inputs, in order

    def to_bool(self, obj: fx.Proxy) -> bool:
        """A condition on sizes, dtypes or devices (`assert H == self.img_size[0]`, `if
        x.device != self.w.device`) decided on the meta inputs, so that forward traces on. A
        condition on values (a meta tensor has none) still stops the tracer. Deciding a size
        condition bakes the branch in: the variant at other sizes (api.py) refuses the task if
        it takes another."""
        if self.inputs is None:
            return super().to_bool(obj)
        try:
            value = self._value_of(obj.node)
        except Exception:
            return super().to_bool(obj)
        if not isinstance(value, bool):
            return super().to_bool(obj)
        self.decisions.append(value)
        return value

    def _value_of(self, target: fx.Node) -> Any:
        """The node's value with the inputs: the graph so far, run on meta tensors with fx's
        patches of nn.Module lifted (else running it would trace into this graph)."""
        from torch.fx._symbolic_trace import _maybe_revert_all_patches

        graph = fx.Graph()
        env: dict[fx.Node, fx.Node] = {}
        for node in self.graph.nodes:
            env[node] = graph.node_copy(node, lambda n: env[n])
            if node is target:
                break
        graph.output(env[target])
        with _maybe_revert_all_patches():
            return fx.Interpreter(fx.GraphModule(self.root, graph)).run(*(self.inputs or []))

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
    """Model(*get_init_inputs()) and get_inputs() on the meta device, floats cast to `dtype`.

    A constructor that reads a value back from a small tensor it made (Swin's
    `[x.item() for x in torch.linspace(0, rate, n)]`) is built again with such tensors made on
    the CPU, then moved to the meta device.
    """
    try:
        with torch.device("meta"):
            model = ns["Model"](*ns["get_init_inputs"]())
    except (RuntimeError, NotImplementedError) as e:
        if "meta" not in str(e):
            raise
        with torch.device("meta"), _SmallFactoriesOnCpu():
            model = ns["Model"](*ns["get_init_inputs"]())
        model = model.to("meta")
    with torch.device("meta"):
        inputs = list(ns["get_inputs"]())
    model = model.to(dtype)
    inputs = [
        x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
    ]
    return model, inputs


class _SmallFactoriesOnCpu(torch.overrides.TorchFunctionMode):
    """Tensors made from a few Python numbers (linspace, arange, tensor) on the CPU, where
    `.item()` has a value to read; every other factory still makes meta tensors."""

    FACTORIES = (torch.linspace, torch.logspace, torch.arange, torch.tensor, torch.as_tensor)
    MAX_ELEMENTS = 1 << 16

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.FACTORIES and kwargs.get("device") is None and self._small(func, args):
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)

    def _small(self, func, args) -> bool:
        """Whether the factory makes at most MAX_ELEMENTS values (judged before it runs)."""
        numbers = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        if func in (torch.linspace, torch.logspace):
            return len(args) >= 3 and isinstance(args[2], int) and args[2] <= self.MAX_ELEMENTS
        if func is torch.arange:
            if not numbers or len(numbers) != len(args):
                return False
            start, end, step = (0, numbers[0], 1) if len(numbers) == 1 else (*numbers[:2], 1)
            step = numbers[2] if len(numbers) > 2 else step
            return step != 0 and abs((end - start) / step) <= self.MAX_ELEMENTS
        data = args[0] if args else None
        return not isinstance(data, torch.Tensor) and len(str(data)) <= self.MAX_ELEMENTS


def trace(model: nn.Module, path: str, inputs: list[Any] | None = None) -> fx.GraphModule:
    """The fx graph of model.forward, or Unsupported with the line that stopped the tracer.
    With the (meta) inputs, conditions on sizes, dtypes and devices are decided on them."""
    tracer = LeafTracer(inputs)
    try:
        with _traced_conversions(model):
            graph = tracer.trace(model)
    except Exception as e:  # fx raises many types (TraceError, TypeError, ...): all mean "no"
        raise Unsupported(f"torch.fx cannot trace Model.forward ({_why(e, path)})") from e
    gm = fx.GraphModule(model, graph)
    gm.meta["decisions"] = tracer.decisions  # api.py: the fp32 and fp16 traces must agree
    return gm


@contextlib.contextmanager
def _traced_conversions(model: nn.Module):
    """`int(...)` and `float(...)` of a traced value (Swin's `int(windows.shape[0] / (H * W /
    ws / ws))`) recorded as a graph node, which the candidate's forward writes as the same
    call, instead of stopping the tracer (a Proxy has no __int__). The task's module-level
    names are where its functions look `int` up: the names are bound there for the trace and
    put back after it; values that are not traced go to the builtins unchanged."""
    scopes = {
        id(g): g
        for cls in type(model).__mro__
        for fn in vars(cls).values()
        if (g := getattr(fn, "__globals__", None)) is not None
        and g.get("__name__") not in ("torch", "builtins")
        and not str(g.get("__name__", "")).startswith(("torch.", "kernelwright."))
    }
    for m in model.modules():  # the task's submodules' classes (their module's names too)
        fwd = getattr(type(m), "forward", None)
        g = getattr(fwd, "__globals__", None)
        if g is not None and not str(g.get("__name__", "")).startswith("torch"):
            scopes[id(g)] = g

    def conversion(real):
        def convert(x=0, *rest):
            if isinstance(x, fx.Proxy) and not rest:
                return x.tracer.create_proxy("call_function", real, (x,), {})
            return real(x, *rest)

        convert.__name__ = real.__name__
        return convert

    patched = {"int": conversion(int), "float": conversion(float)}
    saved = [(g, {k: g[k] for k in patched if k in g}) for g in scopes.values()]
    for g in scopes.values():
        g.update(patched)
    try:
        yield
    finally:
        for g, old in saved:
            for k in patched:
                if k in old:
                    g[k] = old[k]
                else:
                    g.pop(k, None)


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
