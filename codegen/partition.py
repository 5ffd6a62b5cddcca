"""Partition the canonical graph into fused groups, each one kernel (or one kernel pipeline).

Greedy in execution order. A pointwise op joins the group of an operand when the shapes agree
(same domain, or a small producer used only there, recomputed per element), a reduction turns
the pointwise group that feeds it into its prologue, ops on the reduced values or on the full row
that use them join the reduction's group, and a matmul or a convolution takes its pointwise
epilogue. A join that
would need a value computed outside the group from the group's own results is refused (groups
stay convex, so each runs as one unit in the forward).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ir import CV, MM, PW, RED, STORE, Graph, Node, reduced_shape

POINTWISE, ROW, SPLIT, MATMUL, CONV = "pointwise", "row", "split", "matmul", "conv"
# Groups built around one product that take the pointwise ops on its output as an epilogue.
PRODUCTS = (MATMUL, CONV)


@dataclass(eq=False)
class Geometry:
    """Where a reduction group's values live: full rows of shape `full`, reduced over `dims`.

    `groups` (group norm) splits dim 1 into groups whose rows are reduced whole.
    """

    full: tuple[int, ...]
    dims: tuple[int, ...]
    groups: int | None = None

    def key(self) -> tuple:
        return (self.full, self.dims, self.groups)

    @property
    def template(self) -> str:
        rank = len(self.full)
        if self.groups is not None:
            return ROW
        if self.dims == tuple(range(rank)) or (rank >= 3 and self.dims == (0, *range(2, rank))):
            return SPLIT
        contiguous = self.dims == tuple(range(self.dims[0], self.dims[-1] + 1))
        return ROW if contiguous else ""

    def reduced_shapes(self) -> set[tuple[int, ...]]:
        if self.groups is not None:
            return {(self.full[0], self.groups)}
        return {
            reduced_shape(self.full, self.dims, True),
            reduced_shape(self.full, self.dims, False),
        }


@dataclass(eq=False)
class Group:
    kind: str
    nodes: list[Node] = field(default_factory=list)
    domain: tuple[int, ...] | None = None  # pointwise / matmul: the output shape
    geometry: Geometry | None = None
    # Filled by finish(): values read from outside, values written for outside.
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    name: str = ""
    # Row groups written over their inputs' storage order (layout.py): that order, else None.
    layout: tuple[int, ...] | None = None
    # Embedding lookups the group reads by itself (gather.py): id(lookup) -> (table, index).
    gathers: dict[int, tuple[Node, Node]] = field(default_factory=dict)

    def members(self) -> set[int]:
        return {id(n) for n in self.nodes}

    @property
    def reds(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == RED]

    @property
    def stores(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == STORE]


def supported_geometry(x_shape: tuple[int, ...], dims: tuple[int, ...], groups=None) -> bool:
    return bool(dims) and Geometry(tuple(x_shape), tuple(dims), groups).template != ""


def partition(graph: Graph) -> list[Group]:
    return _Partitioner(graph).run()


class _Partitioner:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.order = {id(n): i for i, n in enumerate(graph.nodes)}
        self.group_of: dict[int, Group] = {}
        self.groups: list[Group] = []
        self.outputs = {id(n) for n in graph.output_nodes()}

    def run(self) -> list[Group]:
        for n in self.graph.nodes:
            if n.kind == MM:
                self.new(MATMUL, n, domain=n.shape)
            elif n.kind == CV:
                self.new(CONV, n, domain=n.shape)
            elif n.kind == RED:
                self.place_reduction(n)
            elif n.kind == PW:
                self.place_pointwise(n)
            elif n.kind == STORE:
                value = n.args[1]
                self.join(self.group_of[id(value)], n)
        for g in self.groups:
            self.finish(g)
        return [g for g in self.groups if g.nodes]

    # -- building --------------------------------------------------------------------------------

    def new(self, kind: str, n: Node, **kw) -> Group:
        g = Group(kind, **kw)
        self.groups.append(g)
        self.join(g, n)
        return g

    def join(self, g: Group, n: Node) -> None:
        g.nodes.append(n)
        self.group_of[id(n)] = g

    def merge(self, into: Group, other: Group) -> None:
        for n in other.nodes:
            self.group_of[id(n)] = into
        into.nodes = sorted(into.nodes + other.nodes, key=lambda n: self.order[id(n)])
        other.nodes = []

    def arg_groups(self, n: Node) -> list[Group]:
        seen: list[Group] = []
        for a in n.tensor_args():
            g = self.group_of.get(id(a))
            if g is not None and g not in seen:
                seen.append(g)
        return seen

    # -- reductions ------------------------------------------------------------------------------

    def place_reduction(self, n: Node) -> None:
        x = n.args[0]
        geo = Geometry(x.shape, n.attrs["dims"], n.attrs.get("groups"))
        source = self.group_of.get(id(x))
        prologue = source if source is not None and source.kind == POINTWISE else None
        for g in self.arg_groups(n) + self.sibling_groups(n, geo):
            same = g.kind in (ROW, SPLIT) and g.geometry.key() == geo.key()
            if same and self.reduction_fits(g, n):
                self.join(g, n)
                shared = prologue is not None and prologue.domain == x.shape
                if shared and self.convex_pair(g, prologue):
                    self.merge(g, prologue)
                return
        if prologue is not None and prologue.domain == x.shape and self.convex_with(prologue, n):
            prologue.kind, prologue.geometry, prologue.domain = geo.template, geo, None
            self.join(prologue, n)
            return
        self.new(geo.template, n, geometry=geo)

    def sibling_groups(self, n: Node, geo: Geometry) -> list[Group]:
        """Reduction groups over the same rows of the same tensor (mean and var of x, or
        sum(x) and argmax(|x|)): one read of x serves both."""
        roots = self.roots(n.args[0])
        out = []
        for g in self.groups:
            if not g.nodes or g.kind not in (ROW, SPLIT) or g.geometry.key() != geo.key():
                continue
            if roots & set().union(*(self.roots(r.args[0]) for r in g.reds)):
                out.append(g)
        return out

    def roots(self, v: Node) -> set[int]:
        """The tensors outside pointwise chains that v is computed from elementwise."""
        if v.kind != PW:
            return {id(v)}
        out: set[int] = set()
        for a in v.tensor_args():
            if a.shape == v.shape:
                out |= self.roots(a)
        return out

    def reduction_fits(self, g: Group, n: Node) -> bool:
        if not self.convex_with(g, n):
            return False
        if g.kind == SPLIT:
            # One pass of partial statistics: a reduction of another's result needs its own pass.
            return not any(self.depends_on_reduced(a, g) for a in n.tensor_args())
        return True

    def only_full(self, g: Group, geo: Geometry) -> bool:
        return all(m.shape is not None for m in g.nodes)

    # -- pointwise -------------------------------------------------------------------------------

    def place_pointwise(self, n: Node) -> None:
        # Reduction and matmul groups first: an op on a statistic belongs with it.
        order = {ROW: 0, SPLIT: 0, MATMUL: 1, CONV: 1, POINTWISE: 2}
        for g in sorted(self.arg_groups(n), key=lambda g: order[g.kind]):
            if self.pointwise_fits(g, n) and self.convex_with(g, n):
                self.join(g, n)
                self.absorb_siblings(g, n)
                return
        self.new(POINTWISE, n, domain=n.shape)

    def pointwise_fits(self, g: Group, n: Node) -> bool:
        if g.kind == POINTWISE:
            if n.attrs.get("reshape"):
                return False
            if n.shape == g.domain:
                return True
            if _broadcasts(g.domain, n.shape) and self.used_only_by(g, n):
                g.domain = n.shape
                return True
            return False
        if g.kind in PRODUCTS:
            return n.shape == g.domain and not n.attrs.get("reshape")
        geo = g.geometry
        reduced = [a for a in n.tensor_args() if self.is_reduced(a, g)]
        if n.attrs.get("reshape"):
            return bool(reduced) and n.shape in geo.reduced_shapes()
        full_args = [
            a
            for a in n.tensor_args()
            if self.group_of.get(id(a)) is g and not self.is_reduced(a, g)
        ]
        if n.shape == geo.full and not (reduced and g.kind == SPLIT):
            # A full-row value: its in-group operands are full values or (row kernel) stats.
            return bool(full_args) or bool(reduced)
        if reduced and not full_args and n.shape in geo.reduced_shapes():
            return all(
                self.is_reduced(a, g) or _broadcasts(a.shape, n.shape) for a in n.tensor_args()
            )
        return False

    def absorb_siblings(self, g: Group, n: Node) -> None:
        """Other groups n reads from join g when they fit: pointwise groups of the same domain
        (x.relu() + y.exp()), small ones used only here (a bias computed as b * 2), reduction
        groups over the same rows (sum|x| and sum x*x of one row)."""
        domain = g.geometry.full if g.kind in (ROW, SPLIT) else g.domain
        for other in self.arg_groups(n):
            if other is g or not other.nodes:
                continue
            same_rows = g.kind == ROW == other.kind and g.geometry.key() == other.geometry.key()
            fits = same_rows
            if other.kind == POINTWISE and g.kind in (POINTWISE, *PRODUCTS):
                if other.domain == domain and g.kind not in PRODUCTS:
                    fits = True
                elif _broadcasts(other.domain, domain):
                    fits = self.used_only_by(other, n, extra=g)
            elif other.kind == POINTWISE and g.kind in (ROW, SPLIT):
                # Same rows (a prologue), or per-row values (the running-stat update of batch
                # norm reads running_mean, a parameter, next to the batch mean).
                fits = other.domain == domain and g.kind == ROW
                if other.domain in g.geometry.reduced_shapes():
                    fits = self.used_only_by(other, n, extra=g)
            if fits and self.convex_pair(g, other):
                self.merge(g, other)

    def used_only_by(self, g: Group, n: Node, extra: Group | None = None) -> bool:
        members = g.members() | {id(n)} | (extra.members() if extra else set())
        return all(id(u) in members for m in g.nodes for u in m.users) and not any(
            id(m) in self.outputs for m in g.nodes
        )

    # -- reduced values --------------------------------------------------------------------------

    def is_reduced(self, a: Node, g: Group) -> bool:
        """a is a per-row value of g: a statistic, or computed from statistics alone."""
        if self.group_of.get(id(a)) is not g or g.geometry is None:
            return False
        if a.kind == RED:
            return not a.attrs.get("scan")
        if a.kind == PW:
            return a.shape != g.geometry.full and any(
                self.is_reduced(b, g) for b in a.tensor_args()
            )
        return False

    def depends_on_reduced(self, a: Node, g: Group) -> bool:
        if self.group_of.get(id(a)) is not g:
            return False
        if self.is_reduced(a, g):
            return True
        return any(self.depends_on_reduced(b, g) for b in a.tensor_args())

    # -- convexity -------------------------------------------------------------------------------

    def convex_with(self, g: Group, n: Node) -> bool:
        """No operand of n outside g is itself computed from g (which would need a cycle)."""
        members = g.members()
        return not any(id(a) not in members and self.reaches(members, a) for a in n.tensor_args())

    def convex_pair(self, g: Group, other: Group) -> bool:
        both = g.members() | other.members()
        for grp in (g, other):
            for m in grp.nodes:
                for a in m.tensor_args():
                    if id(a) not in both and self.reaches(both, a):
                        return False
        return True

    def reaches(self, members: set[int], a: Node) -> bool:
        """a depends (through any path) on a node in `members`."""
        stack, seen = [a], set()
        while stack:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if id(v) in members:
                return True
            stack.extend(v.tensor_args())
            stack.extend(x for x in v.kwargs.values() if isinstance(x, Node))
        return False

    # -- inputs and outputs ----------------------------------------------------------------------

    def finish(self, g: Group) -> None:
        members = g.members()
        seen: set[int] = set()
        for n in g.nodes:
            for a in n.tensor_args():
                if id(a) not in members and id(a) not in seen:
                    seen.add(id(a))
                    g.inputs.append(a)
        g.outputs = [
            n
            for n in g.nodes
            if n.kind != STORE
            and (id(n) in self.outputs or any(id(u) not in members for u in n.users))
        ]


def _broadcasts(small: tuple[int, ...] | None, big: tuple[int, ...]) -> bool:
    if small is None:  # a Python number read at run time (symbolic.bind_constants): a scalar
        return True
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(small[::-1], big[::-1]))
