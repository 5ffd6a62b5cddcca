"""fx graph -> canonical graph: one op name per meaning (F.relu, torch.relu, x.relu(), nn.ReLU
are all `relu`), composite ops decomposed into pointwise ops and reductions (softmax, norms), and
in-place ops turned into values, with every tensor's shape and symbolic dtype attached."""

from __future__ import annotations

import builtins
import operator
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from . import ops, recurrent
from .ir import INPUT, PARAM, SCALAR, STORE, TORCH, Graph, Node
from .layout import memory_order
from .normalize_builder import NoPattern
from .normalize_conv import POOLS, ConvOps
from .normalize_matmul import MatmulOps
from .normalize_norms import NormOps
from .normalize_reductions import ReductionOps
from .trace import TensorInfo
from .unsupported import Unsupported

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


def normalize(
    gm: fx.GraphModule, info32: dict[str, Any], info16: dict[str, Any], *, pools: bool = False
) -> Graph:
    """The canonical graph of a traced model (in the mode, train or eval, it is in). `pools`:
    pooling modules become CV nodes (kernel_pool.py) instead of staying torch's."""
    normalizer = _Normalizer(gm, info32, info16)
    normalizer.pools = pools
    return normalizer.run()


class _Normalizer(ReductionOps, NormOps, MatmulOps, ConvOps):
    """Walks the fx graph; the ops it meets are built by the op_ methods of its bases."""

    pools = False  # pooling modules as CV nodes (normalize's `pools`)

    # -- walk ------------------------------------------------------------------------------------

    def run(self) -> Graph:
        inputs: list[Node] = []
        output: Any = None
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                attrs = {"arg": n.target}
                info = self.info32.get(n.name)
                if isinstance(info, (int, float)) and not isinstance(info, bool):
                    # A number forward takes (`A * s`, s a float of get_inputs()): read where it
                    # is passed, a scalar argument of the kernels that use it.
                    value = {"expr": str(n.target), "value": info}
                    self.env[n] = Node(self.fresh(n.target), SCALAR, "python", (), value)
                    self.nodes.append(self.env[n])
                    continue
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
            # fx keeps a tensor forward made while tracing (torch.tensor(self.value)) as
            # `_tensor_constantN` of the graph module, which ModelNew would not have.
            if str(n.target).startswith("_tensor_constant"):
                if (number := _scalar_constant(self.gm, n.target)) is not None:
                    # A 0-dim one of a number (torch.min(x, torch.tensor(self.value))): the
                    # number, as if forward had written it (bound to its attribute like any).
                    return number
                raise Unsupported(f"forward creates a constant tensor ({n.target})")
            node = self.param(n.target)
            if node is None:
                # A plain tensor attribute (`self.hidden = torch.randn(...)` in __init__): state
                # outside the state_dict, which the candidate could neither load nor keep alike.
                raise Unsupported(
                    f"forward reads self.{n.target}, a tensor that is neither a parameter nor a "
                    "buffer (state kept outside the model's state_dict)"
                )
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
            node = self.make(TORCH, "call", n.name, args, None, None, fx_op=n.op)
            node.target, node.kwargs = n.target, kwargs
            if n.op == "call_module":  # an RNN, LSTM or GRU: codegen/recurrent.py's kernel
                recurrent.attach(node, self.gm.get_submodule(n.target))

            def pick(part: Any, path: tuple[int, ...]) -> Any:
                # One tensor of the tuple, nested ones too (an LSTM's `out, (h, c)`).
                if isinstance(part, tuple):
                    return tuple(pick(p, (*path, i)) for i, p in enumerate(part))
                if not isinstance(part, TensorInfo):
                    raise Unsupported(f"{n.name} returns a tuple with non-tensor parts")
                return self.make(
                    TORCH,
                    "getitem",
                    "_".join([n.name, *map(str, path)]),
                    (node, *path),
                    part.shape,
                    self.dtype_of(n, path),
                    expr="{0}" + "".join(f"[{{{k + 1}}}]" for k in range(len(path))),
                )

            return tuple(pick(part, (i,)) for i, part in enumerate(info))
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
        except NoPattern:
            return None
        inplace = call.inplace or bound.get("inplace") is True
        if result is not None and inplace:
            return self.inplace(n, bound["input"], result)
        return result

    def module(self, n: fx.Node, mod: nn.Module, args: tuple, kwargs: dict) -> Any:
        try:
            return self.module_op(n, mod, args, kwargs)
        except NoPattern:
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
        if isinstance(mod, nn.TripletMarginLoss) and len(args) == 3 and not kwargs:
            held = {k: getattr(mod, k) for k in ("margin", "p", "eps", "swap", "reduction")}
            bound = ops.bind("triplet_margin_loss", args, held)
            return self.op_triplet_margin_loss(n, "triplet_margin_loss", bound)
        if isinstance(mod, nn.PairwiseDistance) and len(args) == 2 and not kwargs:
            return self.pairwise(n, args[0], args[1], mod.norm, mod.eps, mod.keepdim)
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
        if isinstance(mod, nn.modules.conv._ConvNd):
            return self.conv_module(n, mod, "self" + _attr_path(n.target), args, kwargs)
        if self.pools and type(mod) in POOLS:
            return self.pool_module(n, mod, "self" + _attr_path(n.target), args, kwargs)
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


def _mark_gather(node: Any, args: Any, kwargs: dict) -> None:
    """F.embedding(index, weight) with no max_norm (which renormalises the table in place)."""
    if not isinstance(node, Node) or len(args) != 2 or kwargs.get("max_norm") is not None:
        return
    index, weight = args
    if isinstance(index, Node) and isinstance(weight, Node):
        node.attrs["gather"] = (weight, index)


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


# Loss modules: (op, the attributes besides `reduction` that its op_ method reads).
_LOSS_MODULES: dict[type, tuple[str, tuple[str, ...]]] = {
    nn.MSELoss: ("mse_loss", ()),
    nn.L1Loss: ("l1_loss", ()),
    nn.SmoothL1Loss: ("smooth_l1_loss", ("beta",)),
    nn.HuberLoss: ("huber_loss", ("delta",)),
    nn.CrossEntropyLoss: ("cross_entropy", ("weight", "ignore_index", "label_smoothing")),
}


def _is_view(n: fx.Node) -> bool:
    if n.op == "call_method":
        return n.target in VIEW_METHODS
    return n.op == "call_function" and n.target in VIEW_FUNCTIONS


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


def _scalar_constant(gm: fx.GraphModule, target: str) -> float | int | None:
    """The number a 0-dim floating tensor constant of the graph module holds (fx keeps
    torch.tensor(self.value) so), as torch reads it: its float32 value; None otherwise."""
    value = getattr(gm, target, None)
    if not isinstance(value, torch.Tensor) or value.dim() != 0 or not value.is_floating_point():
        return None
    if value.dtype != torch.get_default_dtype():
        return None  # torch.tensor(v, dtype=...): promotion would differ from a number's
    return float(value)
