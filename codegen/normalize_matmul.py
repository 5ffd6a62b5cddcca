"""matmul / bmm / linear / addmm, and an einsum that is one of them, as MM nodes (trans_b: a
Linear weight read transposed)."""

from __future__ import annotations

from typing import Any

import torch.fx as fx

from .ir import MM, Node
from .normalize_builder import GraphBuilder


class MatmulOps(GraphBuilder):
    """The op_ methods of the products, each an MM node."""

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

    def op_einsum(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        operands = b["operands"]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])  # torch.einsum(equation, [a, b])
        if not isinstance(b["equation"], str) or len(operands) != 2:
            return None
        a, other = operands
        if not isinstance(a, Node) or not isinstance(other, Node):
            return None
        trans_b = einsum_as_matmul(b["equation"], len(a.shape), len(other.shape))
        return None if trans_b is None else self.mm(n, a, other, trans_b)

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


def einsum_as_matmul(equation: str, rank_a: int, rank_b: int) -> bool | None:
    """Whether an einsum of two operands is a product `mm` makes, and with b read transposed:
    a's last index contracted with one index of a matrix b, a's other indices then b's free
    one out, in that order ("bijl,lk->bijk", "ij,kj->ik"), or a batched product of two 3-D
    operands ("bij,bjk->bik"). None for anything else (torch's einsum stays)."""
    equation = equation.replace(" ", "")
    if "." in equation or equation.count("->") > 1:
        return None
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != 2:
        return None
    ta, tb = terms
    if not arrow:  # implicit output: the indices seen once, in alphabetical order
        out = "".join(sorted(c for c in set(lhs) - {","} if lhs.count(c) == 1))
    if (len(ta), len(tb)) != (rank_a, rank_b) or not (ta + tb).isalpha():
        return None
    if len(set(ta)) != len(ta) or len(set(tb)) != len(tb) or len(set(out)) != len(out):
        return None
    contracted = (set(ta) & set(tb)) - set(out)
    if len(contracted) != 1 or ta[-1] not in contracted or set(out) != set(ta + tb) - contracted:
        return None
    (c,) = contracted
    if rank_b == 2:
        (k,) = set(tb) - {c}
        if out != ta[:-1] + k:
            return None
        return tb == k + c
    if rank_a == rank_b == 3 and tb[0] == ta[0] and tb[1] == c and out == ta[:2] + tb[2]:
        return False
    return None
