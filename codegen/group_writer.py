"""What every kernel template shares: names, run-time shapes and dtypes, loads and pointwise
lines of a group."""

from __future__ import annotations

from dataclasses import dataclass, field

from .body import Body, load_cast
from .index import SCALAR, Access
from .ir import PW, TASK, Node
from .ir import SCALAR as SCALAR_KIND
from .partition import Group
from .pysrc import literal
from .unsupported import Unsupported


@dataclass
class Emitted:
    """One group's code: top-level blocks (kernels, launcher) and what the file must declare."""

    launcher: str
    blocks: list[list[str]]
    helpers: set[str]
    tunables: list[str]
    summary: str
    outputs: list[Node] = field(default_factory=list)


class GroupWriter:
    def __init__(
        self, g: Group, title: str, dtype: str, split_rows: bool = False, alone: bool = False
    ) -> None:
        self.g = g
        # A row group: whether its file carries the split path for few long rows.
        self.split_rows = split_rows
        self.title = title
        self.dtype = dtype  # the run's dtype name: picks tile defaults
        # The group is all the forward's kernel work: it must launch one whatever its tunables.
        self.alone = alone
        self.body = Body()
        self.members = g.members()
        self.tensors = [n for n in g.inputs if n.kind != SCALAR_KIND]
        self.scalars = [n for n in g.inputs if n.kind == SCALAR_KIND]
        self._shapes: dict[int, str] = {}
        # A lookup the group reads by itself has no tensor in the launcher: its shape is the
        # index's with the table's row length appended.
        self._outside: dict[int, str] = {
            key: f"(*{index.name}.shape, {weight.name}.shape[1])"
            for key, (weight, index) in g.gathers.items()
        }

    @property
    def launcher(self) -> str:
        return f"_{self.title}"

    @property
    def kernel(self) -> str:
        return f"_{self.title}_kernel"

    # -- run-time facts, as launcher expressions -------------------------------------------------

    def shape_expr(self, n: Node) -> str:
        """Python for n's run-time shape inside the launcher."""
        if id(n) in self._shapes:
            return self._shapes[id(n)]
        leaves = self.shape_leaves(n)
        if not leaves:
            raise Unsupported(f"no run-time shape for {n.name}")
        out = leaves[0] if len(leaves) == 1 else f"torch.broadcast_shapes({', '.join(leaves)})"
        self._shapes[id(n)] = out
        return out

    def shape_leaves(self, n: Node) -> list[str]:
        """The outside tensors' shapes that n's shape is the broadcast of."""
        if id(n) not in self.members:
            if id(n) in self._outside:
                return [self._outside[id(n)]]
            return [f"{n.name}.shape"] if n.shape else []
        out: list[str] = []
        for a in n.tensor_args():
            if a.kind == SCALAR_KIND:
                continue
            for s in self.shape_leaves(a):
                if s not in out:
                    out.append(s)
        return out

    def dtype_expr(self, n: Node) -> str:
        if n.dtype != TASK:
            return literal(n.dtype)
        for t in self.tensors:
            if t.dtype == TASK:
                return f"{t.name}.dtype"
        raise Unsupported(f"{n.name}: no input tells the run-time dtype")

    def device_expr(self) -> str:
        return f"{self.tensors[0].name}.device"

    # -- kernel pieces ---------------------------------------------------------------------------

    def output_allocations(self, outputs: list[Node], runtime_shape) -> list[str]:
        """`name = torch.empty(...)` launcher lines; runtime_shape(o) gives an output's size
        expressions, or None when it has the group's full shape (`shape`)."""
        lines = []
        for o in outputs:
            runtime = runtime_shape(o)
            if runtime is None:
                shp = "shape"
            else:
                shp = "(" + ", ".join(runtime) + ("," if len(runtime) == 1 else "") + ")"
            lines.append(
                f"    {o.name} = torch.empty({shp}, dtype={self.dtype_expr(o)}, "
                f"device={self.device_expr()})"
            )
        return lines

    def load(self, n: Node, acc: Access, mask: str, indent: str) -> str:
        ptr = f"{n.name}_ptr"
        cast = load_cast(n)
        if acc.kind == SCALAR:
            return f"{indent}{n.name} = tl.load({ptr}){cast}"
        return f"{indent}{n.name} = tl.load({ptr} + {_wrap(acc.expr)}, mask={mask}){cast}"

    def pointwise_line(self, n: Node, indent: str, expand=None) -> str:
        """`name = expr` for pointwise member n; `expand(arg)` gives an arg's text."""
        operands = []
        for a in n.args:
            if isinstance(a, Node):
                text = expand(a) if expand else a.name
                operands.append((a, text))
            else:
                operands.append((a, None))
        return f"{indent}{n.name} = {self.body.expr(n, operands)}"

    def summary(self) -> str:
        ops = ["embedding"] if self.g.gathers else []
        for n in self.g.nodes:
            label = n.origin or n.op
            if label not in ops:
                ops.append(label)
        return " -> ".join(ops)


def _wrap(index: str) -> str:
    return index if index.replace("_", "").isalnum() else f"({index})" if "+" in index else index


def is_pointwise(n: Node) -> bool:
    return n.kind == PW
