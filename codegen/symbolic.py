"""Constants that change with the task's sizes, bound to the model attribute they came from.

fx bakes plain Python attributes into the graph: `x * self.scale` with `self.scale = 1 /
sqrt(head_dim)` traces as `x * 0.125`. Tracing the task at a second size shows which constants
move; one whose value equals a model attribute at both sizes is read from that attribute at run
time (a kernel argument), so the candidate is right at every size. One with no such attribute
stays a literal, and the caller refuses the candidate when the two renderings then differ.
"""

from __future__ import annotations

import numbers
from typing import Any

from torch import nn

from .ir import PW, SCALAR, TORCH, Graph, Node


def bind_constants(a: Graph, b: Graph, model_a: nn.Module, model_b: nn.Module) -> None:
    """Replace, in both graphs, operand constants that differ between them by a read of the
    model attribute holding them."""
    if len(a.nodes) != len(b.nodes):
        return
    attrs = _numeric_attributes(model_a, model_b)
    attrs = {**_products(attrs), **attrs}  # one attribute first, else a product of two
    made: dict[str, tuple[Node, Node]] = {}

    def bound(ca: Any, cb: Any) -> tuple[Any, Any]:
        # Inside an index too: `x[:, : self.cluster_size]` is a tuple holding a slice.
        if isinstance(ca, (tuple, list)) and type(ca) is type(cb) and len(ca) == len(cb):
            pairs = [bound(x, y) for x, y in zip(ca, cb)]
            return type(ca)(p[0] for p in pairs), type(cb)(p[1] for p in pairs)
        if isinstance(ca, slice) and isinstance(cb, slice):
            parts = [bound(x, y) for x, y in zip(_parts(ca), _parts(cb))]
            return slice(*(p[0] for p in parts)), slice(*(p[1] for p in parts))
        if not _number(ca) or not _number(cb) or ca == cb:
            return ca, cb
        path = attrs.get((ca, cb))
        if path is None:
            return ca, cb
        if path not in made:
            made[path] = (_read(path, ca), _read(path, cb))
        return made[path]

    for na, nb in zip(a.nodes, b.nodes):
        if na.kind != nb.kind or na.op != nb.op or len(na.args) != len(nb.args):
            continue
        if na.kind not in (PW, TORCH, SCALAR) or na.attrs.get("expr"):
            continue
        # Operands of a kernel's op, and the arguments of what stays torch or Python in forward
        # (`split(self.n_embd)`, `view(B, T, self.n_head, C // self.n_head)`).
        pairs = [bound(ca, cb) for ca, cb in zip(na.args, nb.args)]
        na.args, nb.args = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        if na.kind != PW and na.kwargs.keys() == nb.kwargs.keys():
            kw = {k: bound(na.kwargs[k], nb.kwargs[k]) for k in na.kwargs}
            na.kwargs = {k: v[0] for k, v in kw.items()}
            nb.kwargs = {k: v[1] for k, v in kw.items()}
    for ga, (sa, _sb) in ((a, (0, 0)), (b, (1, 1))):
        for reads in made.values():
            ga.nodes.insert(0, reads[sa])
    a.link_users()
    b.link_users()


def _parts(s: slice) -> tuple[Any, Any, Any]:
    return s.start, s.stop, s.step


def _read(path: str, value: Any) -> Node:
    """A read of `path` (an attribute, or `a * b` of two) in forward."""
    parts = path.split(" * ")
    name = "attr_" + "_times_".join(p.replace(".", "_") for p in parts)
    expr = " * ".join("self." + p for p in parts)
    node = Node(name, SCALAR, "python", (), {"expr": expr, "value": value})
    return node


def _products(attrs: dict[tuple[Any, Any], str]) -> dict[tuple[Any, Any], str]:
    """(a * b in one model, in the other) -> "a * b", for integer attributes: a size forward
    computes from two (ViT's `p * p * channels`, where `p = self.patch_size`). Both models'
    values must agree, which a coincidence at two unrelated sets of sizes hardly does."""
    ints = sorted(
        (path, va, vb) for (va, vb), path in attrs.items() if type(va) is int and type(vb) is int
    )
    out: dict[tuple[Any, Any], str] = {}
    for i, (pa, va, vb) in enumerate(ints):
        for pb, wa, wb in ints[i:]:
            if min(va, vb, wa, wb) > 1:
                out.setdefault((va * wa, vb * wb), f"{pa} * {pb}")
    return out


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


def _numeric_attributes(a: nn.Module, b: nn.Module) -> dict[tuple[Any, Any], str]:
    """(value in a, value in b) -> attribute path, for number attributes of every submodule."""
    out: dict[tuple[Any, Any], str] = {}
    mods_b = dict(b.named_modules())
    for prefix, ma in a.named_modules():
        mb = mods_b.get(prefix)
        if mb is None:
            continue
        for key, va in vars(ma).items():
            vb = vars(mb).get(key)
            if key.startswith("_") or not _number(va) or not _number(vb):
                continue
            path = f"{prefix}.{key}" if prefix else key
            out.setdefault((va, vb), path)
    return out
