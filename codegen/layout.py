"""Row groups over an input stored in another order than its logical one.

A task may hand its forward a permuted view: x of logical shape (B, S, D) stored as (B, D, S),
so the last dim, the one softmax reduces, has stride S. The row kernel's launcher made such an
input contiguous first: a transposing copy of the whole tensor before the kernel reads it again
(level2/14: 0.38x of torch.compile, 21% of the roofline on the H200).

When every tensor a row group reads is a task input stored in the same order, the group is
written over that storage order instead: the reduced dim becomes a middle dim of the stored
tensor, which the row kernel reads with coalesced columns. The outputs keep the logical
(contiguous) layout eager gives them, so the kernel stores each tile transposed. An input that
arrives in another layout at run time is still correct: the launcher's `.permute(...)
.contiguous()` then copies, as `.contiguous()` did before. Measured on the H200 (level2/14):
1.68x of torch.compile, 90% of the roofline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .ir import INPUT, RED, SCALAR, STORE, Node
from .partition import ROW, Geometry, Group
from .trace import TensorInfo


def memory_order(info: TensorInfo) -> tuple[int, ...] | None:
    """The logical dims from outermost to innermost in memory, for a dense input stored in a
    permuted order; None when it is contiguous, has size-1 dims, or overlaps or has gaps."""
    shape, stride = info.shape, info.stride
    if len(stride) != len(shape) or len(shape) < 2 or any(s <= 1 for s in shape):
        return None
    order = storage_order(shape, stride)
    return None if order == tuple(range(len(shape))) else order


def stride_order(stride: Sequence[int]) -> tuple[int, ...]:
    """The dims by decreasing stride (ties in logical order): outermost in memory first."""
    return tuple(sorted(range(len(stride)), key=lambda d: (-stride[d], d)))


def storage_order(shape: Sequence[int], stride: Sequence[int]) -> tuple[int, ...] | None:
    """stride_order when the strides are those of a dense tensor stored in that order; None when
    they overlap or leave gaps. A size-1 dim's stride is not checked (it never moves)."""
    order = stride_order(stride)
    expected = 1
    for d in reversed(order):
        if shape[d] != 1 and stride[d] != expected:
            return None
        expected *= shape[d]
    return order


def in_memory_order(g: Group) -> Group:
    """g written over its inputs' storage order (a copy with `layout` set), or g itself."""
    perm = _eligible(g)
    if perm is None:
        return g
    copies: dict[int, Node] = {}

    def permuted(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[p] for p in perm)

    def copy(n: Node) -> Node:
        if id(n) in copies:
            return copies[id(n)]
        attrs = dict(n.attrs)
        if n.kind == RED:
            attrs["dims"] = tuple(sorted(perm.index(d) for d in n.attrs["dims"]))
            if "shape" in attrs:
                attrs["shape"] = permuted(attrs["shape"])
        args = _mapped(n.args, copy)
        shape = permuted(n.shape) if n.shape is not None else None
        copies[id(n)] = dataclasses.replace(n, args=args, attrs=attrs, shape=shape, users=[])
        return copies[id(n)]

    geo = g.geometry
    nodes = [copy(n) for n in g.nodes]
    return Group(
        ROW,
        nodes,
        g.domain,
        Geometry(permuted(geo.full), tuple(sorted(perm.index(d) for d in geo.dims))),
        [copy(a) if a.kind != SCALAR else a for a in g.inputs],
        [copy(o) for o in g.outputs],
        g.name,
        layout=perm,
    )


def _mapped(args, copy):
    """args with every tensor Node replaced by its copy (Python scalars stay shared)."""
    if isinstance(args, (tuple, list)):
        return type(args)(_mapped(a, copy) for a in args)
    if isinstance(args, Node) and args.kind != SCALAR:
        return copy(args)
    return args


def _eligible(g: Group) -> tuple[int, ...] | None:
    """The storage order to write g in, when g reduces the last dim of inputs that all share one
    order placing that dim before others (perm = (outer dims..., last, inner dims...)), and every
    value of g keeps the full rank (its outputs have the full shape)."""
    geo = g.geometry
    if g.kind != ROW or geo is None or geo.groups is not None:
        return None
    rank = len(geo.full)
    if geo.dims != (rank - 1,):
        return None
    tensors = [a for a in g.inputs if a.kind != SCALAR]
    orders = {a.attrs.get("memory_order") for a in tensors}
    if not tensors or len(orders) != 1 or any(a.kind != INPUT for a in tensors):
        return None
    perm = orders.pop()
    if perm is None or any(a.shape != geo.full for a in tensors):
        return None
    # The reduced dim stored before some others, which keep their logical order: the transposed
    # store below writes outer * n_red * n_inner + inner * n_red + r.
    k = perm.index(rank - 1)
    if k == rank - 1 or perm != (*range(k), rank - 1, *range(k, rank - 1)):
        return None
    for n in g.nodes:
        if n.kind == STORE or n.shape is None or len(n.shape) != rank:
            return None
        if n.attrs.get("scan") or n.attrs.get("reshape"):
            return None
    if any(o.shape != geo.full for o in g.outputs):
        return None
    return perm
