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

from ..sandbox.task.metashapes import quick_rnns
from .unsupported import Unsupported


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
            graph = tracer.trace(model, concrete_args=_defaults_past(model, inputs))
            _drop_none_asserts(graph)
    except Exception as e:  # fx raises many types (TraceError, TypeError, ...): all mean "no"
        err = Unsupported(f"torch.fx cannot trace Model.forward ({_why(e, path)})")
        err.lineno = _line(e, path)  # loops.py outlines a loop that stopped the tracer
        raise err from e
    gm = fx.GraphModule(model, graph)
    gm.meta["decisions"] = tracer.decisions  # api.py: the fp32 and fp16 traces must agree
    return gm


def _defaults_past(model: nn.Module, inputs: list[Any] | None) -> dict[str, Any] | None:
    """forward's parameters past the inputs given, at their defaults (Mamba's
    `initial_states=None`): fx would trace each as a value of unknown type, so that `if
    initial_states is None` took the other branch, the one the task never takes when it is
    called with its inputs."""
    import inspect

    if inputs is None:
        return None
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    past = {
        p.name: p.default
        for p in params[len(inputs) :]
        if p.kind in positional and p.default is None
    }
    return past or None


def _drop_none_asserts(graph: fx.Graph) -> None:
    """fx's check that a parameter fixed at None is None (a call of its private helper): the
    candidate's forward is called as the task's, with its inputs alone, so the parameter stays
    in its signature with the default and the check goes."""
    from torch.fx._symbolic_trace import _assert_is_none

    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is _assert_is_none and not node.users:
            graph.erase_node(node)


@contextlib.contextmanager
def _traced_conversions(model: nn.Module):
    """`int(...)` and `float(...)` of a traced value (Swin's `int(windows.shape[0] / (H * W /
    ws / ws))`) recorded as a graph node, which the candidate's forward writes as the same
    call, instead of stopping the tracer (a Proxy has no __int__), and so is a factory of
    torch given a traced size (SIZED_FACTORIES); einops' rearrange as the
    reshape and permute it stands for (rearrange.py). The task's module-level
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

    conversions = {"int": conversion(int), "float": conversion(float)}
    factories = {name: getattr(torch, name) for name in SIZED_FACTORIES}
    for name, real in factories.items():  # torch's parser takes no Proxy for a size
        setattr(torch, name, _traced_factory(real))
    saved = []
    for g in scopes.values():
        patched = {**conversions, **_einops_names(g)}
        saved.append((g, patched, {k: g[k] for k in patched if k in g}))
        g.update(patched)
    try:
        yield
    finally:
        for name, real in factories.items():
            setattr(torch, name, real)
        for g, patched, old in saved:
            for k in patched:
                if k in old:
                    g[k] = old[k]
                else:
                    g.pop(k, None)


# torch's factories that take sizes as Python ints: `torch.ones(T, T, device=x.device)` with T
# from x.size() stops fx (the argument parser refuses a Proxy before __torch_function__).
SIZED_FACTORIES = ("ones", "zeros", "empty", "full", "rand", "randn", "arange", "eye")


_PY_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64}


def _traced_factory(real):
    def factory(*args, **kwargs):
        tracer = _tracer_of((*args, *kwargs.values()))
        if tracer is None:
            return real(*args, **kwargs)
        if kwargs.get("dtype") in _PY_DTYPES:  # `dtype=bool`: torch's own name for it
            kwargs["dtype"] = _PY_DTYPES[kwargs["dtype"]]
        return tracer.create_proxy("call_function", real, args, kwargs)

    factory.__name__ = real.__name__
    return factory


def _tracer_of(values) -> Any:
    """The tracer of the first Proxy among values (tuples and lists looked into), or None."""
    for v in values:
        if isinstance(v, fx.Proxy):
            return v.tracer
        if isinstance(v, (tuple, list)):
            found = _tracer_of(v)
            if found is not None:
                return found
    return None


def _einops_names(g: dict[str, Any]) -> dict[str, Any]:
    """The task's names for einops' rearrange (the function, or the module) bound to the
    traced form (rearrange.py), which writes it as torch's reshape and permute."""
    import sys
    import types

    einops = sys.modules.get("einops")  # imported by the task if it uses it
    if einops is None:
        return {}
    from .rearrange import traced_rearrange

    real = getattr(einops, "rearrange", None)
    names: dict[str, Any] = {}
    for k, v in g.items():
        if real is not None and v is real:
            names[k] = traced_rearrange(real)
        elif v is einops:
            shim = types.SimpleNamespace(**vars(einops))
            shim.rearrange = traced_rearrange(real)
            names[k] = shim
    return names


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


def _frame(e: BaseException, path: str) -> traceback.FrameSummary | None:
    """The innermost frame of the exception in the task file, or None."""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename == path:
            return frame
    return None


def _line(e: BaseException, path: str) -> int | None:
    """The task file's line the exception came from (the innermost one), or None."""
    frame = _frame(e, path)
    return frame.lineno if frame is not None else None


def _why(e: BaseException, path: str) -> str:
    """The first line of an exception, with the task line it came from when there is one."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    first = first[:160]
    frame = _frame(e, path)
    if frame is None or frame.lineno is None:
        return first
    code = (frame.line or linecache.getline(path, frame.lineno)).strip()
    return f"{first}; at line {frame.lineno}: {code}"
