"""Embedding lookups read inside the row group that reduces them.

`nn.Embedding(V, E)(ids).sum(dim=1)` (an embedding bag) is left to torch by the normaliser: the
lookup materialises (B, L, E) (2.1 GB for level2/17), which the row kernel then reads back
(0.69x of torch.compile, 9% of the roofline on the H200). When a row group reduces the lookup over
the index dims and keeps the embedding dim as its contiguous inner dim, the group reads the table
rows itself: one index per row of its (BLOCK_R, BLOCK_I) tile, then BLOCK_I contiguous elements
of that table row. The lookup is then no longer computed by the forward. Measured on the H200
(level2/17): 2.03x of torch.compile, 3.22x of eager (0.498 ms for 2.1 GB of gathered rows).

An index outside [0, V) reads zeros (eager raises on it); the tile mask keeps every read inside
the table.
"""

from __future__ import annotations

import torch

from .ir import PW, RED, Graph, Node
from .partition import ROW, Group


def fuse_gathers(graph: Graph, groups: list[Group]) -> None:
    """Mark each lookup a row group can read by itself (`g.gathers`, the node's "fused" attr) and
    give the group the index and table as inputs in its place."""
    outputs = {id(n) for n in graph.output_nodes()}
    for g in groups:
        for t in list(g.inputs):
            if "gather" not in t.attrs or id(t) in outputs or not _fits(g, t):
                continue
            weight, index = t.attrs["gather"]
            at = g.inputs.index(t)
            new = [a for a in (index, weight) if a not in g.inputs]
            g.inputs[at : at + 1] = new
            g.gathers[id(t)] = (weight, index)
            t.attrs["fused"] = True


def _fits(g: Group, t: Node) -> bool:
    """A row group reducing t over the index dims, with the embedding dim as its inner dim, and
    reading t only as whole rows (a reduction's input or a full-shape pointwise operand)."""
    geo = g.geometry
    if g.kind != ROW or geo is None or geo.groups is not None or t.shape != geo.full:
        return False
    rank = len(geo.full)
    if rank < 2 or geo.dims[-1] != rank - 2:  # the inner dims must be exactly the embedding dim
        return False
    weight, index = t.attrs["gather"]
    if index.shape != geo.full[:-1] or weight.shape is None or len(weight.shape) != 2:
        return False
    if weight.shape[1] != geo.full[-1] or index.dtype not in _INDEX_DTYPES:
        return False
    members = g.members()
    if id(index) in members or id(weight) in members:
        return False  # the group computes its own index: no tensor to read it from
    for u in t.users:
        if id(u) not in members:
            return False  # the lookup is needed elsewhere too: torch keeps computing it
        if u.kind == RED and (u.args[0] is not t or any(a is t for a in u.args[1:])):
            return False
        if u.kind == PW and u.shape != geo.full:
            return False
        if u.kind not in (RED, PW):
            return False
    return True


_INDEX_DTYPES = (torch.int64, torch.int32)
