"""fx graph -> canonical graph: one op name per meaning (F.relu, torch.relu, x.relu(), nn.ReLU
are all `relu`), composite ops decomposed into pointwise ops and reductions (softmax, norms), and
in-place ops turned into values, with every tensor's shape and symbolic dtype attached."""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from . import ops
from .ir import (
    INPUT,
    MM,
    PARAM,
    PW,
    RED,
    SCALAR,
    STORE,
    TASK,
    TORCH,
    Graph,
    Node,
    broadcast_shape,
    reduced_shape,
)
from .kernel_split import SPLIT_OPS
from .layout import memory_order
from .partition import SPLIT, Geometry
from .trace import TensorInfo, Unsupported

VIEW_METHODS = {
    "view",
    "reshape",
    "flatten",
    "unflatten",
    "unsqueeze",
    "squeeze",
    "transpose",
    "permute",
    "t",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "view_as",
    "split",
    "chunk",
    "unbind",
    "movedim",
    "swapaxes",
    "diagonal",
    "as_strided",
}
VIEW_FUNCTIONS = {
    torch.reshape,
    torch.flatten,
    torch.unsqueeze,
    torch.squeeze,
    torch.transpose,
    torch.permute,
    torch.t,
    torch.narrow,
    torch.select,
    torch.split,
    torch.chunk,
    torch.unbind,
    torch.movedim,
    torch.swapaxes,
    operator.getitem,
}

UNARY_MODULES: dict[type, tuple[str, tuple[str, ...]]] = {
    nn.ReLU: ("relu", ()),
    nn.ReLU6: ("relu6", ()),
    nn.Sigmoid: ("sigmoid", ()),
    nn.Tanh: ("tanh", ()),
    nn.SiLU: ("silu", ()),
    nn.Mish: ("mish", ()),
    nn.SELU: ("selu", ()),
    nn.Hardsigmoid: ("hardsigmoid", ()),
    nn.Hardswish: ("hardswish", ()),
    nn.Softsign: ("softsign", ()),
    nn.LogSigmoid: ("logsigmoid", ()),
    nn.Tanhshrink: ("tanhshrink", ()),
    nn.LeakyReLU: ("leaky_relu", ("negative_slope",)),
    nn.ELU: ("elu", ("alpha",)),
    nn.CELU: ("celu", ("alpha",)),
    nn.Softplus: ("softplus", ("beta", "threshold")),
    nn.Softshrink: ("softshrink", ("lambd",)),
    nn.Hardshrink: ("hardshrink", ("lambd",)),
    nn.Threshold: ("threshold", ("threshold", "value")),
}


def normalize(gm: fx.GraphModule, info32: dict[str, Any], info16: dict[str, Any]) -> Graph:
    """The canonical graph of a traced model (in the mode, train or eval, it is in)."""
    return _Normalizer(gm, info32, info16).run()


class _Normalizer:
    def __init__(self, gm: fx.GraphModule, info32: dict[str, Any], info16: dict[str, Any]):
        self.gm = gm
        self.info32 = info32
        self.info16 = info16
        self.nodes: list[Node] = []
        self.names: set[str] = set()
        self.env: dict[fx.Node, Any] = {}
        self.params: dict[str, Node] = {}
        self.effects: list[tuple[int, str]] = []
        self.origin = ""

    # -- bookkeeping -----------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base).strip("_") or "v"
        if base[0].isdigit() or base in RESERVED:
            base = "v_" + base
        name, i = base, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name

    def add(self, node: Node) -> Node:
        node.origin = node.origin or self.origin
        self.nodes.append(node)
        return node

    def make(self, kind: str, op: str, base: str, args: tuple, shape, dtype, **attrs) -> Node:
        return self.add(Node(self.fresh(base), kind, op, args, attrs, shape, dtype))

    def pw(self, op: str, *args: Any, dtype: Any, base: str | None = None, **attrs) -> Node:
        shapes = [a.shape for a in args if isinstance(a, Node)]
        shape = attrs.pop("shape", None) or broadcast_shape(*shapes)
        return self.make(PW, op, base or op, args, shape, dtype, **attrs)

    def red(self, op: str, x: Node, dims, keepdim: bool, dtype: Any, *extra, **attrs) -> Node:
        template = Geometry(tuple(x.shape), tuple(dims), attrs.get("groups")).template
        if not dims or not template or (template == SPLIT and op not in SPLIT_OPS):
            raise _NoPattern(op)
        shape = attrs.pop("shape", None) or reduced_shape(x.shape, dims, keepdim)
        return self.make(
            RED, op, op, (x, *extra), shape, dtype, dims=dims, keepdim=keepdim, **attrs
        )

    def param(self, path: str) -> Node | None:
        value = _resolve(self.gm, path)
        if value is None:
            return None
        if path not in self.params:
            dtype = TASK if value.is_floating_point() else value.dtype
            node = Node(
                self.fresh(path.replace(".", "_")),
                PARAM,
                "param",
                (),
                {"path": path},
                tuple(value.shape),
                dtype,
            )
            self.params[path] = node
        return self.params[path]

    def dtype_of(self, n: fx.Node, index: int | None = None) -> Any:
        a, b = self.info32.get(n.name), self.info16.get(n.name)
        if index is not None:
            a, b = a[index], b[index]
        if not isinstance(a, TensorInfo):
            return None
        if a.dtype == b.dtype:
            if a.dtype == torch.float64:
                raise Unsupported(f"{n.name} computes in float64")
            return a.dtype
        return TASK

    def shape_of(self, n: fx.Node, index: int | None = None) -> tuple[int, ...] | None:
        a = self.info32.get(n.name)
        if index is not None:
            a = a[index]
        return a.shape if isinstance(a, TensorInfo) else None

    def arg(self, a: Any) -> Any:
        return fx.node.map_arg(a, lambda n: self.env[n])

    # -- walk ------------------------------------------------------------------------------------

    def run(self) -> Graph:
        inputs: list[Node] = []
        output: Any = None
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                attrs = {"arg": n.target}
                info = self.info32.get(n.name)
                if isinstance(info, TensorInfo) and (order := memory_order(info)) is not None:
                    attrs["memory_order"] = order
                node = Node(
                    self.fresh(n.target),
                    INPUT,
                    "input",
                    (),
                    attrs,
                    self.shape_of(n),
                    self.dtype_of(n),
                )
                inputs.append(node)
                self.env[n] = node
            elif n.op == "output":
                output = self.arg(n.args[0])
            else:
                self.origin = _origin(n, self.gm)
                self.env[n] = self.visit(n)
        graph = Graph(self.nodes, inputs, output, self.effects)
        for p in self.params.values():
            graph.nodes.insert(0, p)
        return _prune(graph)

    def visit(self, n: fx.Node) -> Any:
        if n.op == "get_attr":
            node = self.param(n.target)
            if node is None:
                raise Unsupported(f"forward creates a constant tensor ({n.target})")
            return node
        args, kwargs = self.arg(n.args), self.arg(n.kwargs)
        shape = self.shape_of(n)
        info = self.info32.get(n.name)
        tensors_in = isinstance(info, tuple) and any(isinstance(i, TensorInfo) for i in info)
        if shape is None and not tensors_in:
            return self.scalar(n, args, kwargs)
        if n.op == "call_module":
            result = self.module(n, self.gm.get_submodule(n.target), args, kwargs)
        elif n.op == "call_function" and n.target in ops.FUNCTIONS:
            result = self.call(n, ops.FUNCTIONS[n.target], args, kwargs)
        elif n.op == "call_method" and n.target in ops.METHODS:
            result = self.call(n, ops.METHODS[n.target], args, kwargs)
        elif (
            n.op == "call_function" and n.target is operator.getitem and isinstance(args[0], tuple)
        ):
            return args[0][args[1]]
        elif (
            n.op == "call_function" and n.target is builtins.getattr and isinstance(args[0], tuple)
        ):
            return args[0][{"values": 0, "indices": 1}[args[1]]]
        else:
            result = None
        if result is None:
            result = self.torch_node(n, args, kwargs)
            if n.op == "call_function" and n.target is torch.nn.functional.embedding:
                _mark_gather(result, args, kwargs)
            target = _mutated(n, args, kwargs)
            if isinstance(target, Node) and isinstance(result, Node):
                # Torch mutates `target` in place: later reads must see (and follow) the call,
                # earlier reads must precede it (the forward writer orders them).
                result.attrs["mutates"] = target
                for k, v in list(self.env.items()):
                    if v is target:
                        self.env[k] = result
        return result

    def scalar(self, n: fx.Node, args: Any, kwargs: Any) -> Node:
        """A Python value computed in forward (sizes, arithmetic on them)."""
        if n.op == "call_function" and n.target is operator.getitem and isinstance(args[0], tuple):
            return args[0][args[1]]
        node = self.make(SCALAR, "python", n.name, args, None, None)
        node.target, node.kwargs, node.attrs["fx_op"] = n.target, kwargs, n.op
        return node

    def torch_node(self, n: fx.Node, args: Any, kwargs: Any) -> Any:
        """Left to torch: emitted as the same call (conv, pooling, views, anything unknown)."""
        info = self.info32.get(n.name)
        if isinstance(info, tuple):
            parts = []
            for part in info:
                if not isinstance(part, TensorInfo):
                    raise Unsupported(f"{n.name} returns a tuple with non-tensor parts")
                parts.append(part)
            node = self.make(TORCH, "call", n.name, args, None, None, fx_op=n.op)
            node.target, node.kwargs = n.target, kwargs
            picks = []
            for i, part in enumerate(parts):
                pick = self.make(
                    TORCH,
                    "getitem",
                    f"{n.name}_{i}",
                    (node, i),
                    part.shape,
                    self.dtype_of(n, i),
                    expr="{0}[{1}]",
                )
                picks.append(pick)
            return tuple(picks)
        node = self.make(TORCH, "call", n.name, args, self.shape_of(n), self.dtype_of(n))
        node.target, node.kwargs, node.attrs["fx_op"] = n.target, kwargs, n.op
        return node

    # -- in-place ops ----------------------------------------------------------------------------

    def inplace(self, n: fx.Node, target: Any, result: Node) -> Node:
        """Record that `target` now holds `result`: later reads of it see the new value."""
        if not isinstance(target, Node) or target.kind in (INPUT, PARAM):
            raise Unsupported(f"{n.name} modifies a forward input or parameter in place")
        src = next(k for k, v in self.env.items() if v is target)
        for user in src.users:
            if _is_view(user):
                raise Unsupported(f"{n.name} modifies in place a tensor that has views")
        for k, v in list(self.env.items()):
            if v is target:
                self.env[k] = result
        return result

    # -- calls -----------------------------------------------------------------------------------

    def call(self, n: fx.Node, call: ops.Call, args: tuple, kwargs: dict) -> Any:
        try:
            bound = ops.bind(call.sig, args, kwargs)
        except TypeError:
            return None
        handler = getattr(self, "op_" + call.op, None) or self.op_pointwise
        try:
            result = handler(n, call.op, bound)
        except _NoPattern:
            return None
        inplace = call.inplace or bound.get("inplace") is True
        if result is not None and inplace:
            return self.inplace(n, bound["input"], result)
        return result

    def module(self, n: fx.Node, mod: nn.Module, args: tuple, kwargs: dict) -> Any:
        try:
            return self.module_op(n, mod, args, kwargs)
        except _NoPattern:
            return None

    def module_op(self, n: fx.Node, mod: nn.Module, args: tuple, kwargs: dict) -> Any:
        x = args[0] if args else None
        if type(mod) in UNARY_MODULES and isinstance(x, Node):
            op, names = UNARY_MODULES[type(mod)]
            bound = {"input": x, **{k: getattr(mod, k) for k in names}}
            return self.op_pointwise(n, op, bound)
        if isinstance(mod, nn.GELU):
            return self.op_gelu(n, "gelu", {"input": x, "approximate": mod.approximate})
        if isinstance(mod, nn.Hardtanh):
            return self.op_hardtanh(
                n, "hardtanh", {"input": x, "min_val": mod.min_val, "max_val": mod.max_val}
            )
        if isinstance(mod, (nn.Identity,)):
            return x
        if isinstance(mod, nn.modules.dropout._DropoutNd):
            return x if (mod.p == 0 or not mod.training) else None
        if isinstance(mod, (nn.Softmax, nn.LogSoftmax)):
            op = "softmax" if isinstance(mod, nn.Softmax) else "log_softmax"
            return self.op_softmax(n, op, {"input": x, "dim": mod.dim, "dtype": None})
        loss = _LOSS_MODULES.get(type(mod))
        if loss is not None and len(args) == 2 and not kwargs:
            op, extra = loss
            bound = {"input": args[0], "target": args[1], "reduction": mod.reduction}
            bound.update({k: getattr(mod, k) for k in extra})
            return getattr(self, "op_" + op)(n, op, bound)
        w = lambda name: self.param(f"{n.target}.{name}")  # noqa: E731
        if isinstance(mod, nn.Embedding) and mod.max_norm is None and isinstance(x, Node):
            # Left to torch, marked so that a row group reducing the lookup reads the table
            # rows itself (gather.py). max_norm renormalises the table in place: not marked.
            node = self.torch_node(n, args, kwargs)
            node.attrs["gather"] = (w("weight"), x)
            return node
        if isinstance(mod, nn.Linear):
            return self.op_linear(
                n, "linear", {"input": x, "weight": w("weight"), "bias": w("bias")}
            )
        if isinstance(mod, nn.LayerNorm):
            return self.op_layer_norm(
                n,
                "layer_norm",
                {
                    "input": x,
                    "normalized_shape": mod.normalized_shape,
                    "weight": w("weight"),
                    "bias": w("bias"),
                    "eps": mod.eps,
                },
            )
        if isinstance(mod, nn.GroupNorm):
            # The group count is read from the module at run time: a task may size it.
            groups = self.make(
                SCALAR,
                "python",
                "num_groups",
                (),
                None,
                None,
                expr="self" + _attr_path(n.target) + ".num_groups",
            )
            groups.attrs["value"] = mod.num_groups
            return self.op_group_norm(
                n,
                "group_norm",
                {
                    "input": x,
                    "num_groups": groups,
                    "weight": w("weight"),
                    "bias": w("bias"),
                    "eps": mod.eps,
                },
            )
        if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
            return self.op_rms_norm(
                n,
                "rms_norm",
                {
                    "input": x,
                    "normalized_shape": mod.normalized_shape,
                    "weight": w("weight"),
                    "eps": mod.eps,
                },
            )
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            return self.batch_norm_module(n, mod, x, w)
        if isinstance(mod, nn.modules.instancenorm._InstanceNorm):
            if mod.track_running_stats:
                return None
            return self.op_instance_norm(
                n,
                "instance_norm",
                {
                    "input": x,
                    "running_mean": None,
                    "running_var": None,
                    "weight": w("weight"),
                    "bias": w("bias"),
                    "use_input_stats": True,
                    "momentum": mod.momentum,
                    "eps": mod.eps,
                },
            )
        return None

    def batch_norm_module(self, n: fx.Node, mod: nn.Module, x: Any, w: Any) -> Any:
        training = mod.training or not mod.track_running_stats
        if mod.momentum is None and training and mod.track_running_stats:
            return None  # cumulative moving average: left to torch
        result = self.op_batch_norm(
            n,
            "batch_norm",
            {
                "input": x,
                "running_mean": w("running_mean"),
                "running_var": w("running_var"),
                "weight": w("weight"),
                "bias": w("bias"),
                "training": training,
                "momentum": mod.momentum,
                "eps": mod.eps,
            },
        )
        if result is not None and mod.training and mod.track_running_stats:
            path = _attr_path(n.target)
            self.effects.append((len(self.nodes), f"self{path}.num_batches_tracked.add_(1)"))
        return result

    # -- pointwise -------------------------------------------------------------------------------

    def op_pointwise(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        dtype = self.dtype_of(n)
        if op in ops.BINARY + ops.COMPARE or op in ("div", "pow"):
            other = b.get("other", b.get("exponent"))
            if not isinstance(x, Node) and not isinstance(other, Node):
                return None
            if not _pointwise_operand(x) or not _pointwise_operand(other):
                return None
            if op in ("add", "sub") and b.get("alpha", 1) != 1:
                other = self.pw("mul", other, b["alpha"], dtype=dtype)
            if op == "div":
                mode = b.get("rounding_mode")
                if mode is not None and not _is_float(dtype):
                    return None
                op = {None: "div", "trunc": "div_trunc", "floor": "div_floor"}[mode]
            return self.pw(op, x, other, dtype=dtype, base=n.name)
        if not isinstance(x, Node) or op not in ops.POINTWISE:
            return None
        attrs = {k: v for k, v in b.items() if k not in ("input", "inplace")}
        if any(not isinstance(v, (int, float)) for v in attrs.values()):
            return None
        return self.pw(op, x, dtype=dtype, base=n.name, **attrs)

    def op_gelu(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        if not isinstance(b["input"], Node):
            return None
        return self.pw(f"gelu_{b['approximate']}", b["input"], dtype=self.dtype_of(n), base=n.name)

    def op_hardtanh(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.op_clamp(
            n, "clamp", {"input": b["input"], "min": b["min_val"], "max": b["max_val"]}
        )

    def op_clamp(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        lo, hi = b.get("min"), b.get("max")
        if not isinstance(x, Node) or not (_pointwise_operand(lo) and _pointwise_operand(hi)):
            return None
        return self.pw("clamp", x, lo, hi, dtype=self.dtype_of(n), base=n.name)

    def op_clamp_min(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.op_clamp(n, "clamp", {"input": b["input"], "min": b["min"]})

    def op_clamp_max(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.op_clamp(n, "clamp", {"input": b["input"], "max": b["max"]})

    def op_where(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        c, x, y = b["condition"], b["input"], b["other"]
        if not isinstance(c, Node) or not (_pointwise_operand(x) and _pointwise_operand(y)):
            return None
        return self.pw("where", c, x, y, dtype=self.dtype_of(n), base=n.name)

    def op_nan_to_num(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.is_float:
            return None
        # Infinities become the dtype's largest finite values by default: read at run time.
        posinf, neginf = b["posinf"], b["neginf"]
        if posinf is None:
            posinf = self.make(
                SCALAR,
                "python",
                "finfo_max",
                (_dtype_source(x),),
                None,
                None,
                expr="torch.finfo({0}.dtype).max",
            )
        if neginf is None:
            neginf = self.make(
                SCALAR,
                "python",
                "finfo_min",
                (_dtype_source(x),),
                None,
                None,
                expr="torch.finfo({0}.dtype).min",
            )
        return self.pw(
            "nan_to_num", x, b["nan"], posinf, neginf, dtype=self.dtype_of(n), base=n.name
        )

    def op_dropout(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return b["input"] if (b["p"] == 0 or not b["training"]) else None

    def op_identity(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.cast(n, b["input"])

    op_float = op_half = op_bfloat16 = op_identity

    def op_to(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.cast(n, b["input"])

    def op_type_as(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.cast(n, b["input"])

    def cast(self, n: fx.Node, x: Any) -> Any:
        """A dtype conversion, or x itself when the dtype does not change (contiguous, clone)."""
        if not isinstance(x, Node):
            return None
        dtype = self.dtype_of(n)
        if dtype == x.dtype and self.shape_of(n) == x.shape:
            return x
        if self.shape_of(n) != x.shape:
            return None
        return self.pw("cast", x, dtype=dtype, base=n.name)

    # -- reductions ------------------------------------------------------------------------------

    def dims(self, x: Node, dim: Any) -> tuple[int, ...] | None:
        rank = len(x.shape)
        if dim is None or dim == () or dim == []:
            return tuple(range(rank))
        if isinstance(dim, int):
            dim = (dim,)
        if not all(isinstance(d, int) for d in dim):
            return None
        return tuple(sorted({d % rank for d in dim})) if rank else ()

    def input_as(self, n: fx.Node, x: Any, dtype_arg: Any) -> Any:
        """The reduction input, cast when a dtype= argument asks for it."""
        if not isinstance(x, Node) or not x.shape:
            return None
        if dtype_arg is not None:
            return self.pw("cast", x, dtype=dtype_arg, base=f"{n.name}_in")
        return x

    def op_sum(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = self.input_as(n, b["input"], b.get("dtype"))
        dims = x is not None and self.dims(x, b["dim"])
        if not dims:
            return None
        if not x.is_float:
            return None
        return self.red(op, x, dims, b["keepdim"], self.dtype_of(n))

    op_mean = op_prod = op_amax = op_amin = op_sum

    def op_argmax(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        if b["dim"] is None:
            dims = tuple(range(len(x.shape)))
            return self.red(
                op,
                x,
                dims,
                False,
                torch.int64,
                shape=() if not b["keepdim"] else (1,) * len(x.shape),
            )
        return self.red(op, x, self.dims(x, b["dim"]), b["keepdim"], torch.int64)

    op_argmin = op_argmax

    def op_max(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, dim = b["input"], b["dim"]
        if isinstance(dim, Node):  # torch.max(x, y): elementwise
            return self.op_pointwise(
                n, "maximum" if op == "max" else "minimum", {"input": x, "other": dim}
            )
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        kind = "amax" if op == "max" else "amin"
        if dim is None:
            return self.red(kind, x, self.dims(x, None), False, self.dtype_of(n))
        dims = self.dims(x, dim)
        values = self.red(kind, x, dims, b["keepdim"], self.dtype_of(n, 0))
        arg = "argmax" if op == "max" else "argmin"
        return values, self.red(arg, x, dims, b["keepdim"], torch.int64)

    op_min = op_max

    def op_var(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        correction = b["correction"]
        if correction is None:
            correction = 0 if b["unbiased"] is False else 1
        dims = self.dims(x, b["dim"])
        var = self.red("var", x, dims, b["keepdim"], self.dtype_of(n), correction=correction)
        return self.pw("sqrt", var, dtype=var.dtype, base=n.name) if op == "std" else var

    op_std = op_var

    def op_softmax(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = self.input_as(n, b["input"], b.get("dtype"))
        if x is None or not isinstance(b["dim"], int):
            return None
        dims = (b["dim"] % len(x.shape),)
        dtype = x.dtype
        m = self.red("amax", x, dims, True, dtype)
        s = self.red("sumexp", x, dims, True, dtype, m)
        shifted = self.pw("sub", x, m, dtype=dtype, base="shifted")
        if op == "softmax":
            e = self.pw("exp", shifted, dtype=dtype)
            return self.pw("div", e, s, dtype=dtype, base=n.name)
        return self.pw("sub", shifted, self.pw("log", s, dtype=dtype), dtype=dtype, base=n.name)

    op_log_softmax = op_softmax

    def op_logsumexp(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        return self.lse(x, self.dims(x, b["dim"]), b["keepdim"], self.dtype_of(n), n.name)

    def lse(self, x: Node, dims, keepdim: bool, dtype: Any, base: str) -> Node:
        """log(sum(exp(x))) over `dims`, as max + log(sum(exp(x - max))): two row reductions."""
        m = self.red("amax", x, dims, True, dtype)
        s = self.red("sumexp", x, dims, True, dtype, m)
        out = self.pw("add", m, self.pw("log", s, dtype=dtype), dtype=dtype, base=base)
        return out if keepdim else self.reshape(out, reduced_shape(x.shape, dims, False))

    def reshape(self, x: Node, shape: tuple[int, ...]) -> Node:
        """Same elements, another shape: only used on reduced values (a free relabelling)."""
        return self.pw("cast", x, dtype=x.dtype, base=x.name, shape=shape, reshape=True)

    def norm(self, n: fx.Node, x: Any, p: Any, dim: Any, keepdim: bool) -> Any:
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        dims = self.dims(x, dim)
        dtype = self.dtype_of(n)
        if p in ("fro", 2, 2.0):
            sq = self.pw("mul", x, x, dtype=x.dtype, base="sq")
            return self.pw(
                "sqrt", self.red("sum", sq, dims, keepdim, dtype), dtype=dtype, base=n.name
            )
        if p in (1, 1.0):
            return self.red("sum", self.pw("abs", x, dtype=x.dtype), dims, keepdim, dtype)
        if p == math.inf:
            return self.red("amax", self.pw("abs", x, dtype=x.dtype), dims, keepdim, dtype)
        if isinstance(p, (int, float)) and p > 0:
            powed = self.pw("pow", self.pw("abs", x, dtype=x.dtype), float(p), dtype=x.dtype)
            total = self.red("sum", powed, dims, keepdim, dtype)
            return self.pw("pow", total, 1.0 / p, dtype=dtype, base=n.name)
        return None

    def op_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.norm(n, b["input"], b["p"], b["dim"], b["keepdim"])

    def op_vector_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.norm(n, b["input"], b["ord"], b["dim"], b["keepdim"])

    def op_normalize(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        norm = self.norm(n, x, b["p"], b["dim"], True)
        if norm is None:
            return None
        clamped = self.pw("clamp", norm, b["eps"], None, dtype=norm.dtype)
        return self.pw("div", x, clamped, dtype=self.dtype_of(n), base=n.name)

    def op_cumsum(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = self.input_as(n, b["input"], b.get("dtype"))
        if x is None or not isinstance(b["dim"], int) or not x.is_float:
            return None
        dims = (b["dim"] % len(x.shape),)
        return self.red(op, x, dims, True, self.dtype_of(n), shape=x.shape, scan=True)

    op_cumprod = op_cumsum

    # -- losses ----------------------------------------------------------------------------------

    def loss(self, n: fx.Node, b: dict[str, Any], elementwise) -> Any:
        """An elementwise loss of input and target, then its reduction ('mean', 'sum', 'none').

        `elementwise(diff, dtype)` builds the per-element loss from input - target. The mean and
        sum cover every dim: a whole-tensor split reduction whose output is a 0-dim tensor.
        """
        x, y = b["input"], b["target"]
        if any(b.get(k) is not None for k in ("size_average", "reduce", "weight")):
            return None
        if not (isinstance(x, Node) and isinstance(y, Node) and x.is_float and y.is_float):
            return None
        dtype = self.dtype_of(n)
        reduction = b["reduction"]
        base = n.name if reduction == "none" else None
        diff = self.pw("sub", x, y, dtype=dtype, base="diff")
        per_element = elementwise(diff, dtype, base)
        if reduction == "none":
            return per_element
        if reduction not in ("mean", "sum"):
            return None
        dims = tuple(range(len(per_element.shape)))
        return self.red(reduction, per_element, dims, False, dtype, shape=())

    def op_mse_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.loss(
            n, b, lambda d, dtype, base: self.pw("mul", d, d, dtype=dtype, base=base or "sq")
        )

    def op_l1_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.loss(n, b, lambda d, dtype, base: self.pw("abs", d, dtype=dtype, base=base))

    def op_smooth_l1_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        beta = b["beta"]
        if not isinstance(beta, (int, float)) or beta < 0:
            return None
        if beta == 0:  # torch: exactly the L1 loss
            return self.op_l1_loss(n, op, b)
        # |d| < beta: 0.5 d^2 / beta, else |d| - 0.5 beta (torch's own formula and order)
        return self.loss(n, b, lambda d, dtype, base: self.piecewise(d, dtype, base, beta, 1.0))

    def op_huber_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        delta = b["delta"]
        if not isinstance(delta, (int, float)) or delta <= 0:
            return None
        # |d| < delta: 0.5 d^2, else delta (|d| - 0.5 delta)
        return self.loss(n, b, lambda d, dtype, base: self.piecewise(d, dtype, base, delta, delta))

    def op_cross_entropy(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        """(N, K) logits and (N,) class indices: logsumexp of each row (one read of the logits)
        minus the target's logit, 0 where the target is ignore_index; 'mean' divides the sum by
        the count of targets not ignored (torch's nan when all are).

        The target's logit is picked by torch (x.gather: N scattered reads); class weights,
        label smoothing, probability targets and extra dims are left to torch.
        """
        x, t, ignore = b["input"], b["target"], b["ignore_index"]
        if any(b.get(k) is not None for k in ("weight", "size_average", "reduce")):
            return None
        if b["label_smoothing"] != 0 or not isinstance(ignore, int):
            return None
        if not (isinstance(x, Node) and isinstance(t, Node) and x.is_float) or t.is_float:
            return None
        if len(x.shape) != 2 or tuple(t.shape) != (x.shape[0],):
            return None
        reduction = b["reduction"]
        if reduction not in ("mean", "sum", "none"):
            return None
        dtype = self.dtype_of(n)
        lse = self.lse(x, (1,), False, dtype, "lse")
        picked = self.make(
            TORCH,
            "gather",
            "picked",
            (x, t),
            (x.shape[0],),
            x.dtype,
            expr=f"{{0}}.gather(1, {{1}}.masked_fill({{1}} == {ignore}, 0)[:, None])[:, 0]",
        )
        valid = self.pw("ne", t, ignore, dtype=torch.bool, base="valid")
        # Row losses summed later stay fp32, as torch accumulates them (rounded to bf16 first, the
        # mean's error was four times eager's under the interpreter, whose bf16 stores truncate).
        row_dtype = dtype if reduction == "none" else torch.float32
        loss = self.pw("sub", lse, picked, dtype=row_dtype, base="nll")
        base = n.name if reduction == "none" else "row_loss"
        per_row = self.pw("where", valid, loss, 0.0, dtype=row_dtype, base=base)
        if reduction == "none":
            return per_row
        total = self.red("sum", per_row, (0,), False, torch.float32, shape=())
        if reduction == "mean":
            # Counted in fp32 (exact to 2^24 rows), whatever the logits' dtype.
            counted = self.pw("where", valid, 1.0, 0.0, dtype=torch.float32, base="counted")
            count = self.red("sum", counted, (0,), False, torch.float32, shape=())
            total = self.pw("div", total, count, dtype=torch.float32, base="mean")
        # One rounding to the logits' dtype, at the end (a no-op for fp32).
        return self.make(TORCH, "cast", n.name, (total, x), (), dtype, expr="{0}.to({1}.dtype)")

    def piecewise(self, d: Node, dtype: Any, base: str | None, knot: float, scale: float):
        """Smooth L1 (scale 1: quadratic part divided by the knot) and Huber (scale = knot)."""
        a = self.pw("abs", d, dtype=dtype, base="absdiff")
        quad = self.pw("mul", self.pw("mul", d, d, dtype=dtype, base="sq"), 0.5, dtype=dtype)
        if scale == 1.0:
            quad = self.pw("div", quad, float(knot), dtype=dtype, base="quad")
        lin = self.pw("sub", a, 0.5 * knot, dtype=dtype, base="lin")
        if scale != 1.0:
            lin = self.pw("mul", lin, float(scale), dtype=dtype, base="lin")
        small = self.pw("lt", a, float(knot), dtype=torch.bool, base="small")
        return self.pw("where", small, quad, lin, dtype=dtype, base=base or "elem")

    # -- normalisations --------------------------------------------------------------------------

    def normalized(self, n, x, dims, eps, weight, bias, *, groups=None) -> Node:
        """(x - mean) * rsqrt(var + eps) [* weight] [+ bias] over `dims`, stats kept per row."""
        dtype = self.dtype_of(n)
        count, runtime = groups if groups is not None else (None, None)
        stat_shape = None if groups is None else (x.shape[0], count)
        extra = {} if groups is None else {"groups": count, "shape": stat_shape}
        more = () if runtime is None else (runtime,)
        mean = self.red("mean", x, dims, True, dtype, *more, **extra)
        var = self.red("var", x, dims, True, dtype, *more, correction=0, **dict(extra))
        rstd = self.pw(
            "rsqrt",
            self.pw("add", var, eps, dtype=dtype, shape=var.shape),
            dtype=dtype,
            base="rstd",
            shape=var.shape,
        )
        # (N, G) group statistics do not broadcast over x by shape: the row kernel places them.
        return self.scale_shift(n, x, mean, rstd, weight, bias, dtype, shape=x.shape)

    def scale_shift(self, n, x, mean, rstd, weight, bias, dtype, shape=None) -> Node:
        """(x - mean) * rstd [* weight] [+ bias], the last named for `n`: every normalisation's
        tail. `shape`: the centred and normalised values' shape where the broadcast cannot tell."""
        size = {} if shape is None else {"shape": shape}
        centered = self.pw("sub", x, mean, dtype=dtype, base="centered", **size)
        y = self.pw("mul", centered, rstd, dtype=dtype, base="normed", **size)
        if weight is not None:
            y = self.pw("mul", y, weight, dtype=dtype, base="scaled")
        if bias is not None:
            y = self.pw("add", y, bias, dtype=dtype, base=n.name)
        return y

    def channel(self, t: Any, rank: int) -> Any:
        """A per-channel (C,) tensor viewed as (C, 1, ..., 1) to broadcast over (N, C, ...)."""
        if not isinstance(t, Node):
            return t
        if rank <= 2:
            return t
        nones = ", ".join(["None"] * (rank - 2))
        return self.make(
            TORCH,
            "view",
            f"{t.name}_c",
            (t,),
            (t.shape[0],) + (1,) * (rank - 2),
            t.dtype,
            expr="{0}[:, " + nones + "]",
        )

    def op_layer_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, ns = b["input"], b["normalized_shape"]
        if not isinstance(x, Node) or not x.is_float:
            return None
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        dims = tuple(range(len(x.shape) - len(ns), len(x.shape)))
        return self.normalized(n, x, dims, b["eps"], b["weight"], b["bias"])

    def op_rms_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, ns = b["input"], b["normalized_shape"]
        if not isinstance(x, Node) or not x.is_float:
            return None
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        dims = tuple(range(len(x.shape) - len(ns), len(x.shape)))
        dtype = self.dtype_of(n)
        eps = b["eps"]
        if eps is None:  # torch uses the input dtype's machine epsilon
            eps = self.make(
                SCALAR,
                "python",
                "eps",
                (_dtype_source(x),),
                None,
                None,
                expr="torch.finfo({0}.dtype).eps",
            )
        ms = self.red("mean", self.pw("mul", x, x, dtype=dtype, base="sq"), dims, True, dtype)
        rrms = self.pw("rsqrt", self.pw("add", ms, eps, dtype=dtype), dtype=dtype, base="rrms")
        y = self.pw("mul", x, rrms, dtype=dtype, base="normed")
        if b["weight"] is not None:
            y = self.pw("mul", y, b["weight"], dtype=dtype, base=n.name)
        return y

    def op_group_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, g = b["input"], b["num_groups"]
        if isinstance(g, Node):  # a run-time value (nn.GroupNorm's num_groups)
            g = (g.attrs["value"], g)
        elif isinstance(g, int):
            g = (g, None)
        if (
            not isinstance(x, Node)
            or not x.is_float
            or not isinstance(g, tuple)
            or len(x.shape) < 2
        ):
            return None
        rank = len(x.shape)
        count, runtime = g
        if x.shape[1] % count:
            return None  # torch refuses it
        weight, bias = self.channel(b["weight"], rank), self.channel(b["bias"], rank)
        if x.shape[1] // count * math.prod(x.shape[2:]) > GROUP_SPLIT_ELEMENTS:
            return self.group_norm_split(n, x, count, runtime, b["eps"], weight, bias)
        return self.normalized(
            n, x, tuple(range(1, rank)), b["eps"], weight, bias, groups=(count, runtime)
        )

    def group_norm_split(self, n, x, count, runtime, eps, weight, bias) -> Node:
        """Group norm over long groups: statistics as a split reduction, then one pointwise pass.

        x (N, C, ...) is viewed as (1, N*G, L), each group's L = C/G*... elements contiguous: the
        per-channel statistics template of batch norm with one channel per (sample, group), so
        every SM takes part however few groups there are. mean and rstd (fp32, (N*G,) values)
        are repeated per channel by torch into (N, C, 1, ...) tensors (N*C values) that the
        normalising pointwise kernel reads like a bias. The row kernel would instead give each
        group one program that loops over it twice.
        """
        dtype = self.dtype_of(n)
        rank = len(x.shape)
        groups = "{1}" if runtime is not None else str(count)
        more = (runtime,) if runtime is not None else ()
        view = self.make(
            TORCH,
            "view",
            f"{x.name}_groups",
            (x, *more),
            (1, x.shape[0] * count, x.shape[1] // count * math.prod(x.shape[2:])),
            x.dtype,
            expr="{0}.reshape(1, {0}.shape[0] * " + groups + ", -1)",
        )
        f32 = torch.float32
        mean = self.red("mean", view, (0, 2), True, f32)
        var = self.red("var", view, (0, 2), True, f32, correction=0)
        rstd = self.pw("rsqrt", self.pw("add", var, eps, dtype=f32), dtype=f32, base="rstd")
        stat_groups = "{2}" if runtime is not None else str(count)

        def per_channel(stat: Node, base: str) -> Node:
            return self.make(
                TORCH,
                "view",
                base,
                (stat, x, *more),
                (x.shape[0], x.shape[1]) + (1,) * (rank - 2),
                f32,
                expr="{0}.view({1}.shape[0], -1).repeat_interleave({1}.shape[1] // "
                + stat_groups
                + ", dim=1).view({1}.shape[:2] + (1,) * ({1}.dim() - 2))",
            )

        mean_c, rstd_c = per_channel(mean, "mean_c"), per_channel(rstd, "rstd_c")
        return self.scale_shift(n, x, mean_c, rstd_c, weight, bias, dtype)

    def op_instance_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.is_float or len(x.shape) < 3:
            return None
        if not b["use_input_stats"] or b["running_mean"] is not None:
            return None
        rank = len(x.shape)
        return self.normalized(
            n,
            x,
            tuple(range(2, rank)),
            b["eps"],
            self.channel(b["weight"], rank),
            self.channel(b["bias"], rank),
        )

    def op_batch_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.is_float or len(x.shape) < 2:
            return None
        rank = len(x.shape)
        dims = (0, *range(2, rank))
        dtype = self.dtype_of(n)
        w, bias = self.channel(b["weight"], rank), self.channel(b["bias"], rank)
        rm, rv = b["running_mean"], b["running_var"]
        if not b["training"]:
            if not isinstance(rm, Node) or not isinstance(rv, Node):
                return None
            mean, var = self.channel(rm, rank), self.channel(rv, rank)
            rstd = self.pw(
                "rsqrt", self.pw("add", var, b["eps"], dtype=dtype), dtype=dtype, base="rstd"
            )
        else:
            mean = self.red("mean", x, dims, True, dtype)
            var = self.red("var", x, dims, True, dtype, correction=0)
            rstd = self.pw(
                "rsqrt", self.pw("add", var, b["eps"], dtype=dtype), dtype=dtype, base="rstd"
            )
            if isinstance(rm, Node) and isinstance(rv, Node):
                if b["momentum"] is None:
                    return None
                rm_c, rv_c = self.channel(rm, rank), self.channel(rv, rank)
                self.running_update(x, dims, rm_c, rv_c, mean, b["momentum"], dtype)
        return self.scale_shift(n, x, mean, rstd, w, bias, dtype)

    def running_update(self, x, dims, rm, rv, mean, momentum, dtype) -> None:
        """running = (1 - momentum) * running + momentum * batch stat (unbiased var), in place."""
        unbiased = self.red("var", x, dims, True, dtype, correction=1)
        for buf, stat in ((rm, mean), (rv, unbiased)):
            keep = self.pw(
                "mul",
                buf,
                1.0 - momentum,
                dtype=buf.dtype,
                shape=stat.shape,
                base=f"{buf.name}_keep",
            )
            new = self.pw(
                "add",
                keep,
                self.pw("mul", stat, float(momentum), dtype=dtype),
                dtype=buf.dtype,
                shape=stat.shape,
                base=f"{buf.name}_new",
            )
            self.make(STORE, "store", f"{buf.name}_update", (buf, new), None, None)

    # -- matmul ----------------------------------------------------------------------------------

    def mm(self, n: fx.Node, a: Any, b: Any, trans_b: bool) -> Node | None:
        if not isinstance(a, Node) or not isinstance(b, Node) or not a.is_float:
            return None
        ra, rb = len(a.shape), len(b.shape)
        if ra < 2 or rb < 2 or (rb > 2 and ra != rb) or rb > 3:
            return None
        if rb == 3 and a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0]):
            return None
        shape = self.shape_of(n)
        if trans_b:
            shape = (*a.shape[:-1], b.shape[0])
        return self.make(MM, "matmul", n.name, (a, b), shape, self.dtype_of(n), trans_b=trans_b)

    def op_matmul(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.mm(n, b["input"], b["other"], False)

    def op_linear(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        w = b["weight"]
        if not isinstance(w, Node) or len(w.shape) != 2:
            return None
        y = self.mm(n, b["input"], w, True)
        if y is None or b["bias"] is None:
            return y
        y.name = self.fresh(f"{n.name}_mm")
        return self.pw("add", y, b["bias"], dtype=y.dtype, base=n.name)

    def op_addmm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        y = self.mm(n, b["mat1"], b["mat2"], False)
        if y is None:
            return None
        dtype = y.dtype
        if b["alpha"] != 1:
            y = self.pw("mul", y, b["alpha"], dtype=dtype)
        c = b["input"]
        if b["beta"] != 1:
            c = self.pw("mul", c, b["beta"], dtype=dtype)
        return self.pw("add", y, c, dtype=dtype, base=n.name)


def _mark_gather(node: Any, args: Any, kwargs: dict) -> None:
    """F.embedding(index, weight) with no max_norm (which renormalises the table in place)."""
    if not isinstance(node, Node) or len(args) != 2 or kwargs.get("max_norm") is not None:
        return
    index, weight = args
    if isinstance(index, Node) and isinstance(weight, Node):
        node.attrs["gather"] = (weight, index)


class _NoPattern(Exception):
    """A reduction over dims no template handles: the whole call is left to torch."""


# Triton functions implemented as @jit code: a kernel variable with their name breaks the call
# (seen on the H200: `cumsum = tl.cumsum(...)` fails with NameError('cumsum is not defined')).
TRITON_NAMES = {
    "cumsum",
    "cumprod",
    "softmax",
    "argmax",
    "argmin",
    "sort",
    "flip",
    "xor_sum",
    "reduce",
    "associative_scan",
    "ravel",
    "swizzle2d",
    "zeros_like",
    "topk",
    "interleave",
    "dot",
    "load",
    "store",
    "where",
    "full",
    "zeros",
    "arange",
    "program_id",
    "maximum",
    "minimum",
    "sqrt",
    "sigmoid",
    "exp",
    "log",
    "exp2",
    "log2",
    "erf",
    "cdiv",
    "fma",
    "rsqrt",
    "clamp",
    "cos",
    "sin",
    "floor",
    "ceil",
    "umulhi",
    "cast",
    "broadcast",
    "split",
    "join",
    "view",
}
RESERVED = TRITON_NAMES | {
    "self",
    "x_ptr",
    "tl",
    "triton",
    "torch",
    "math",
    "nn",
    "F",
    "out",
    "offs",
    "mask",
    "pid",
    "shape",
    "grid",
    "input",
    "min",
    "max",
    "sum",
    "abs",
    "float",
    "int",
    "range",
    "len",
    "type",
    "id",
    "map",
    "list",
    "dict",
    "set",
    "tuple",
    "print",
    "str",
    "object",
    "all",
    "any",
}


def _origin(n: fx.Node, gm: fx.GraphModule) -> str:
    """A short readable name for what an fx node does: relu, conv2d, layernorm, add."""
    if n.op == "call_module":
        return type(gm.get_submodule(n.target)).__name__.lower()
    if n.op == "call_method":
        return str(n.target).rstrip("_")
    return getattr(n.target, "__name__", str(n.target)).rstrip("_")


def _mutated(n: fx.Node, args: Any, kwargs: Any) -> Any:
    """The tensor a call left to torch writes in place (x.index_add_(...), out=, inplace=)."""
    if kwargs.get("out") is not None:
        return kwargs["out"]
    in_place = n.op == "call_method" and n.target.endswith("_") and not n.target.startswith("_")
    if (in_place or kwargs.get("inplace") is True) and args:
        return args[0]
    return None


def _dtype_source(x: Node) -> Node:
    """A tensor computed before x with x's dtype: a Python scalar that needs only the dtype
    (torch.finfo) must not read a value inside a fused group, or the group would split."""
    while x.kind in (PW, RED, MM) and x.args and isinstance(x.args[0], Node):
        if x.args[0].dtype != x.dtype:
            break
        x = x.args[0]
    return x


# Group norm groups longer than this (the row kernel's default register block, ROW_MAX_BLOCK)
# take the split path (`group_norm_split`): the row kernel would loop over each of them twice in
# one program, with too few programs to fill the GPU.
GROUP_SPLIT_ELEMENTS = 16384

# Loss modules: (op, the attributes besides `reduction` that its op_ method reads).
_LOSS_MODULES: dict[type, tuple[str, tuple[str, ...]]] = {
    nn.MSELoss: ("mse_loss", ()),
    nn.L1Loss: ("l1_loss", ()),
    nn.SmoothL1Loss: ("smooth_l1_loss", ("beta",)),
    nn.HuberLoss: ("huber_loss", ("delta",)),
    nn.CrossEntropyLoss: ("cross_entropy", ("weight", "ignore_index", "label_smoothing")),
}


def _pointwise_operand(v: Any) -> bool:
    return v is None or isinstance(v, (Node, int, float, bool))


def _is_float(dtype: Any) -> bool:
    return dtype == TASK or (isinstance(dtype, torch.dtype) and dtype.is_floating_point)


def _is_view(n: fx.Node) -> bool:
    if n.op == "call_method":
        return n.target in VIEW_METHODS
    return n.op == "call_function" and n.target in VIEW_FUNCTIONS


def _resolve(gm: nn.Module, path: str) -> torch.Tensor | None:
    obj: Any = gm
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, torch.Tensor) else None


def _attr_path(target: str) -> str:
    """`self`-relative Python for a module path: layers.0.bn -> .layers[0].bn"""
    return "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in target.split("."))


def _prune(graph: Graph) -> Graph:
    """Drop nodes nothing returned or stored depends on (the unused half of max's tuple)."""
    live: set[int] = set()
    stack = graph.output_nodes() + [n for n in graph.nodes if n.kind == STORE]
    while stack:
        n = stack.pop()
        if id(n) in live:
            continue
        live.add(id(n))
        stack.extend(n.tensor_args())
        stack.extend(a for a in _flat(n.kwargs) if isinstance(a, Node))
    graph.nodes = [n for n in graph.nodes if id(n) in live]
    graph.link_users()
    return graph


def _flat(v: Any) -> list[Any]:
    from .ir import flat_args

    return flat_args(v)
