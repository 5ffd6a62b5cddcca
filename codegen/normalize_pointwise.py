"""Pointwise ops of the canonical graph: elementwise math, clamps, where, casts."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from . import ops
from .ir import SCALAR, TASK, TORCH, Node
from .normalize_builder import GraphBuilder, dtype_source


class PointwiseOps(GraphBuilder):
    """The op_ methods of elementwise ops, and the casts they need."""

    def op_pointwise(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        dtype = self.dtype_of(n)
        if op in ops.BINARY + ops.COMPARE or op in ("div", "pow"):
            other = b.get("other", b.get("exponent"))
            if not isinstance(x, Node) and not isinstance(other, Node):
                return None
            if not _pointwise_operand(x) or not _pointwise_operand(other):
                return None
            if op in ("add", "sub") and b.get("alpha", 1) != 1:
                other = self.pw("mul", other, b["alpha"], dtype=dtype)
            if op == "div":
                mode = b.get("rounding_mode")
                if mode is not None and not _is_float(dtype):
                    return None
                op = {None: "div", "trunc": "div_trunc", "floor": "div_floor"}[mode]
            return self.pw(op, x, other, dtype=dtype, base=n.name)
        if not isinstance(x, Node) or op not in ops.POINTWISE:
            return None
        attrs = {k: v for k, v in b.items() if k not in ("input", "inplace")}
        if any(not isinstance(v, (int, float)) for v in attrs.values()):
            return None
        return self.pw(op, x, dtype=dtype, base=n.name, **attrs)

    def op_gelu(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        if not isinstance(b["input"], Node):
            return None
        return self.pw(f"gelu_{b['approximate']}", b["input"], dtype=self.dtype_of(n), base=n.name)

    def op_hardtanh(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.op_clamp(
            n, "clamp", {"input": b["input"], "min": b["min_val"], "max": b["max_val"]}
        )

    def op_clamp(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        lo, hi = b.get("min"), b.get("max")
        if not isinstance(x, Node) or not (_pointwise_operand(lo) and _pointwise_operand(hi)):
            return None
        return self.pw("clamp", x, lo, hi, dtype=self.dtype_of(n), base=n.name)

    def op_clamp_min(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.op_clamp(n, "clamp", {"input": b["input"], "min": b["min"]})

    def op_clamp_max(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.op_clamp(n, "clamp", {"input": b["input"], "max": b["max"]})

    def op_where(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        c, x, y = b["condition"], b["input"], b["other"]
        if not isinstance(c, Node) or not (_pointwise_operand(x) and _pointwise_operand(y)):
            return None
        return self.pw("where", c, x, y, dtype=self.dtype_of(n), base=n.name)

    def op_masked_fill(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        """x.masked_fill(mask, value): where(mask, value, x), the mask broadcast to x (a causal
        mask sliced from a buffer, as attention writes it)."""
        x, mask, value = b["input"], b["mask"], b["value"]
        if not isinstance(x, Node) or not isinstance(mask, Node) or not _pointwise_operand(value):
            return None
        if isinstance(value, Node) and value.shape not in ((), None):
            return None  # masked_fill takes a 0-dim value only
        return self.pw("where", mask, value, x, dtype=self.dtype_of(n), base=n.name)

    def op_nan_to_num(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.is_float:
            return None
        # Infinities become the dtype's largest finite values by default: read at run time.
        posinf, neginf = b["posinf"], b["neginf"]
        if posinf is None:
            posinf = self.make(
                SCALAR,
                "python",
                "finfo_max",
                (dtype_source(x),),
                None,
                None,
                expr="torch.finfo({0}.dtype).max",
            )
        if neginf is None:
            neginf = self.make(
                SCALAR,
                "python",
                "finfo_min",
                (dtype_source(x),),
                None,
                None,
                expr="torch.finfo({0}.dtype).min",
            )
        return self.pw(
            "nan_to_num", x, b["nan"], posinf, neginf, dtype=self.dtype_of(n), base=n.name
        )

    def op_dropout(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return b["input"] if (b["p"] == 0 or not b["training"]) else None

    def op_identity(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if n.target == "contiguous" and isinstance(x, Node) and x.kind == TORCH:
            return None  # after a view torch keeps (a transpose), the copy a later .view() needs
        return self.cast(n, x)

    op_float = op_half = op_bfloat16 = op_identity

    def op_to(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.cast(n, b["input"])

    def op_type_as(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.cast(n, b["input"])

    def cast(self, n: fx.Node, x: Any) -> Any:
        """A dtype conversion, or x itself when the dtype does not change (contiguous, clone)."""
        if not isinstance(x, Node):
            return None
        dtype = self.dtype_of(n)
        if dtype == x.dtype and self.shape_of(n) == x.shape:
            return x
        if self.shape_of(n) != x.shape:
            return None
        return self.pw("cast", x, dtype=dtype, base=n.name)


def _pointwise_operand(v: Any) -> bool:
    return v is None or isinstance(v, (Node, int, float, bool))


def _is_float(dtype: Any) -> bool:
    return dtype == TASK or (isinstance(dtype, torch.dtype) and dtype.is_floating_point)
