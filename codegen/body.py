"""The Triton lines of a group's pointwise values: one assignment per op, computed in fp32 for
floating values (half-precision inputs are upcast on load, outputs rounded once on store)."""

from __future__ import annotations

from typing import Any

import torch

from . import ops
from .ir import TASK, Node

F32, BOOL, INT = "f32", "i1", "int"
TL_INT = {
    torch.int64: "tl.int64",
    torch.int32: "tl.int32",
    torch.int16: "tl.int16",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
}


def ctype(n: Node) -> str:
    if n.dtype == TASK or (isinstance(n.dtype, torch.dtype) and n.dtype.is_floating_point):
        return F32
    if n.dtype == torch.bool:
        return BOOL
    return INT


class Body:
    """Collects the helpers the written expressions need."""

    def __init__(self) -> None:
        self.helpers: set[str] = set()

    def expr(self, n: Node, operands: list[tuple[Any, str | None]]) -> str:
        """Triton expression of pointwise node n; operands are (arg, kernel expr) pairs, the
        expr None for Python constants."""
        self.helpers.update(ops.USES.get(n.op, ()))
        result = ctype(n)
        if n.op == "cast":
            arg, text = operands[0]
            return cast(text, ctype(arg), n)
        if n.op in ops.COMPARE or n.op in ("logical_and", "logical_or", "logical_not"):
            want = F32 if any(_is_floaty(a) for a, _ in operands) else INT
            args = [self.operand(a, t, want) for a, t in operands]
        elif n.op == "where":
            cond = self.operand(*operands[0], BOOL)
            args = [cond] + [self.operand(a, t, result) for a, t in operands[1:]]
        else:
            args = [self.operand(a, t, result if result != BOOL else F32) for a, t in operands]
        attrs = {k: ops.flt(v) if isinstance(v, (int, float)) else v for k, v in n.attrs.items()}
        return ops.POINTWISE[n.op](args, attrs)

    def operand(self, arg: Any, text: str | None, want: str) -> ops.Operand:
        if arg is None:
            return ops.Operand("None")
        if not isinstance(arg, Node):
            if want == F32:
                return ops.Operand(ops.flt(float(arg)), arg)
            if want == BOOL:
                return ops.Operand("True" if arg else "False", arg)
            return ops.Operand(repr(int(arg)), arg)
        if arg.kind == "scalar":  # a Python number passed to the kernel: Triton promotes it
            return ops.Operand(text)
        have = ctype(arg)
        if want == F32 and have != F32:
            return ops.Operand(f"{text}.to(tl.float32)")
        if want == BOOL and have != BOOL:
            return ops.Operand(f"({text} != 0)")
        return ops.Operand(text)


def cast(text: str, have: str, n: Node) -> str:
    want = ctype(n)
    if want == have and want != INT:
        return text
    if want == F32:
        return f"{text}.to(tl.float32)"
    if want == BOOL:
        return f"{text} != 0"
    return f"{text}.to({TL_INT[n.dtype]})"


def _is_floaty(a: Any) -> bool:
    if isinstance(a, Node):
        return ctype(a) == F32
    return isinstance(a, float)


def load_cast(n: Node) -> str:
    """Suffix for a load of n: floats are computed in fp32."""
    return ".to(tl.float32)" if ctype(n) == F32 else ""
