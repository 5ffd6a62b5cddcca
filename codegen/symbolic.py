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


def bind_constants(
    a: Graph,
    b: Graph,
    model_a: nn.Module,
    model_b: nn.Module,
    tie: tuple[Graph, nn.Module] | None = None,
) -> None:
    """Replace, in both graphs, operand constants that differ between them by a read of the
    model attribute holding them.

    Two attributes may hold the same value at both sizes (Mamba's `d_head` and `block_len`, 64
    and then 48: every variant moves equal constants alike), and a constant of one would be read
    from the other, wrong wherever they differ. `tie`, the graph and model at sizes where they
    differ, picks the attribute whose value there is the constant there (none: the constant
    stays a literal, and the caller refuses the candidate if the renderings differ). Without a
    tie (no sizes separate them: one quantity stored twice) the first attribute is read."""
    if len(a.nodes) != len(b.nodes):
        return
    attrs = _numeric_attributes(model_a, model_b)
    attrs = {**_products(attrs), **attrs}  # one attribute first, else a product of two
    if tie is not None and (len(tie[0].nodes) != len(a.nodes)):
        tie = None
    values_c = _values(tie[1]) if tie is not None else {}
    made: dict[str, tuple[Node, Node]] = {}

    def bound(ca: Any, cb: Any, cc: Any) -> tuple[Any, Any]:
        # Inside an index too: `x[:, : self.cluster_size]` is a tuple holding a slice.
        if isinstance(ca, (tuple, list)) and type(ca) is type(cb) and len(ca) == len(cb):
            ccs = cc if isinstance(cc, (tuple, list)) and len(cc) == len(ca) else [None] * len(ca)
            pairs = [bound(x, y, z) for x, y, z in zip(ca, cb, ccs)]
            return type(ca)(p[0] for p in pairs), type(cb)(p[1] for p in pairs)
        if isinstance(ca, slice) and isinstance(cb, slice):
            pc = _parts(cc) if isinstance(cc, slice) else (None, None, None)
            parts = [bound(x, y, z) for x, y, z in zip(_parts(ca), _parts(cb), pc)]
            return slice(*(p[0] for p in parts)), slice(*(p[1] for p in parts))
        if not _number(ca) or not _number(cb) or ca == cb:
            return ca, cb
        paths = attrs.get((ca, cb), [])
        if len(paths) > 1 and tie is not None:
            # Those equal at the tie's sizes too are one quantity (an argument stored twice).
            paths = [p for p in paths if _number(cc) and values_c.get(p) == cc]
        if not paths:
            return ca, cb
        path = paths[0]
        if path not in made:
            made[path] = (_read(path, ca), _read(path, cb))
        return made[path]

    nodes_c = tie[0].nodes if tie is not None else [None] * len(a.nodes)
    for na, nb, nc in zip(a.nodes, b.nodes, nodes_c):
        if na.kind != nb.kind or na.op != nb.op or len(na.args) != len(nb.args):
            continue
        if na.kind not in (PW, TORCH, SCALAR) or na.attrs.get("expr"):
            continue
        if nc is not None and (nc.op != na.op or len(nc.args) != len(na.args)):
            nc = None
        # Operands of a kernel's op, and the arguments of what stays torch or Python in forward
        # (`split(self.n_embd)`, `view(B, T, self.n_head, C // self.n_head)`).
        args_c = nc.args if nc is not None else [None] * len(na.args)
        pairs = [bound(ca, cb, cc) for ca, cb, cc in zip(na.args, nb.args, args_c)]
        na.args, nb.args = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        if na.kind != PW and na.kwargs.keys() == nb.kwargs.keys():
            kw_c = nc.kwargs if nc is not None else {}
            kw = {k: bound(na.kwargs[k], nb.kwargs[k], kw_c.get(k)) for k in na.kwargs}
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


def ambiguous(model_a: nn.Module, model_b: nn.Module) -> list[list[str]]:
    """Attributes that hold one value in model_a and one other value in model_b, each group
    two or more of them: which of them a moving constant came from, the two cannot say."""
    attrs = _numeric_attributes(model_a, model_b)
    return [paths for (va, vb), paths in attrs.items() if va != vb and len(paths) > 1]


def separates(model: nn.Module, groups: list[list[str]]) -> bool:
    """Every group's attributes hold values pairwise different in `model`."""
    values = _values(model)
    return all(len({values.get(p) for p in group}) == len(group) for group in groups)


def _values(model: nn.Module) -> dict[str, Any]:
    """Attribute path -> value in `model`, for the paths bind_constants reads (one attribute,
    or a product of two)."""
    attrs = _numeric_attributes(model, model)
    return {p: v for (v, _), paths in {**_products(attrs), **attrs}.items() for p in paths}


def _products(attrs: dict[tuple[Any, Any], list[str]]) -> dict[tuple[Any, Any], list[str]]:
    """(a * b in one model, in the other) -> "a * b", for integer attributes: a size forward
    computes from two (ViT's `p * p * channels`, where `p = self.patch_size`). Both models'
    values must agree, which a coincidence at two unrelated sets of sizes hardly does."""
    ints = sorted(
        (path, va, vb)
        for (va, vb), paths in attrs.items()
        for path in paths
        if type(va) is int and type(vb) is int
    )
    out: dict[tuple[Any, Any], list[str]] = {}
    for i, (pa, va, vb) in enumerate(ints):
        for pb, wa, wb in ints[i:]:
            if min(va, vb, wa, wb) > 1:
                out.setdefault((va * wa, vb * wb), []).append(f"{pa} * {pb}")
    return out


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


def _numeric_attributes(a: nn.Module, b: nn.Module) -> dict[tuple[Any, Any], list[str]]:
    """(value in a, value in b) -> the attribute paths holding them, for number attributes of
    every submodule, in the modules' order."""
    out: dict[tuple[Any, Any], list[str]] = {}
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
            out.setdefault((va, vb), []).append(path)
    return out
