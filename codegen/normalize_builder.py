"""The graph under construction while normalize walks an fx graph: fresh names, node makers,
the parameters read, and the shape and dtype fx reported for each node."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx
from torch import nn

from ..errors import KernelwrightError
from .ir import MM, PARAM, PW, RED, TASK, Node, broadcast_shape, reduced_shape
from .kernel_split import SPLIT_OPS
from .partition import SPLIT, Geometry
from .trace import TensorInfo
from .unsupported import Unsupported


class NoPattern(KernelwrightError):
    """A reduction over dims no template handles: the whole call is left to torch."""

    fault = "task"


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


class GraphBuilder:
    """The nodes made so far and how to make more; the op_ classes build on it."""

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
            raise NoPattern(op)
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

    def dtype_of(self, n: fx.Node, index: int | tuple[int, ...] | None = None) -> Any:
        """The node's dtype (of the tensor at `index` of a tuple, a path into nested ones)."""
        a, b = self.info32.get(n.name), self.info16.get(n.name)
        for i in (index,) if isinstance(index, int) else index or ():
            a, b = a[i], b[i]
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


def dtype_source(x: Node) -> Node:
    """A tensor computed before x with x's dtype: a Python scalar that needs only the dtype
    (torch.finfo) must not read a value inside a fused group, or the group would split."""
    while x.kind in (PW, RED, MM) and x.args and isinstance(x.args[0], Node):
        if x.args[0].dtype != x.dtype:
            break
        x = x.args[0]
    return x


def _resolve(gm: nn.Module, path: str) -> torch.Tensor | None:
    obj: Any = gm
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, torch.Tensor) else None
