"""matmul / bmm / linear / addmm as MM nodes (trans_b: a Linear weight read transposed)."""

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
