"""Reductions of the canonical graph (sum, max, var, softmax, norms of vectors, cumsum) and the
losses decomposed into them."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx as fx

from .ir import TORCH, Node, reduced_shape
from .normalize_pointwise import PointwiseOps


class ReductionOps(PointwiseOps):
    """The op_ methods of reductions and losses (a loss is pointwise ops and a reduction)."""

    def dims(self, x: Node, dim: Any) -> tuple[int, ...] | None:
        rank = len(x.shape)
        if dim is None or dim == () or dim == []:
            return tuple(range(rank))
        if isinstance(dim, int):
            dim = (dim,)
        if not all(isinstance(d, int) for d in dim):
            return None
        return tuple(sorted({d % rank for d in dim})) if rank else ()

    def input_as(self, n: fx.Node, x: Any, dtype_arg: Any) -> Any:
        """The reduction input, cast when a dtype= argument asks for it."""
        if not isinstance(x, Node) or not x.shape:
            return None
        if dtype_arg is not None:
            return self.pw("cast", x, dtype=dtype_arg, base=f"{n.name}_in")
        return x

    def op_sum(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = self.input_as(n, b["input"], b.get("dtype"))
        dims = x is not None and self.dims(x, b["dim"])
        if not dims:
            return None
        if not x.is_float:
            return None
        return self.red(op, x, dims, b["keepdim"], self.dtype_of(n))

    op_mean = op_prod = op_amax = op_amin = op_sum

    def op_argmax(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        if b["dim"] is None:
            dims = tuple(range(len(x.shape)))
            return self.red(
                op,
                x,
                dims,
                False,
                torch.int64,
                shape=() if not b["keepdim"] else (1,) * len(x.shape),
            )
        return self.red(op, x, self.dims(x, b["dim"]), b["keepdim"], torch.int64)

    op_argmin = op_argmax

    def op_max(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, dim = b["input"], b["dim"]
        # torch.max(x, y): elementwise; a float "dim" is a 0-dim tensor constant's number
        # (torch.max(x, torch.tensor(self.value)): normalize.py's _scalar_constant).
        if isinstance(dim, Node) or type(dim) is float:
            return self.op_pointwise(
                n, "maximum" if op == "max" else "minimum", {"input": x, "other": dim}
            )
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        kind = "amax" if op == "max" else "amin"
        if dim is None:
            return self.red(kind, x, self.dims(x, None), False, self.dtype_of(n))
        dims = self.dims(x, dim)
        values = self.red(kind, x, dims, b["keepdim"], self.dtype_of(n, 0))
        arg = "argmax" if op == "max" else "argmin"
        return values, self.red(arg, x, dims, b["keepdim"], torch.int64)

    op_min = op_max

    def op_var(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        correction = b["correction"]
        if correction is None:
            correction = 0 if b["unbiased"] is False else 1
        dims = self.dims(x, b["dim"])
        var = self.red("var", x, dims, b["keepdim"], self.dtype_of(n), correction=correction)
        return self.pw("sqrt", var, dtype=var.dtype, base=n.name) if op == "std" else var

    op_std = op_var

    def op_softmax(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = self.input_as(n, b["input"], b.get("dtype"))
        if x is None or not isinstance(b["dim"], int):
            return None
        dims = (b["dim"] % len(x.shape),)
        dtype = x.dtype
        m = self.red("amax", x, dims, True, dtype)
        s = self.red("sumexp", x, dims, True, dtype, m)
        shifted = self.pw("sub", x, m, dtype=dtype, base="shifted")
        if op == "softmax":
            e = self.pw("exp", shifted, dtype=dtype)
            return self.pw("div", e, s, dtype=dtype, base=n.name)
        return self.pw("sub", shifted, self.pw("log", s, dtype=dtype), dtype=dtype, base=n.name)

    op_log_softmax = op_softmax

    def op_logsumexp(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        return self.lse(x, self.dims(x, b["dim"]), b["keepdim"], self.dtype_of(n), n.name)

    def lse(self, x: Node, dims, keepdim: bool, dtype: Any, base: str) -> Node:
        """log(sum(exp(x))) over `dims`, as max + log(sum(exp(x - max))): two row reductions."""
        m = self.red("amax", x, dims, True, dtype)
        s = self.red("sumexp", x, dims, True, dtype, m)
        out = self.pw("add", m, self.pw("log", s, dtype=dtype), dtype=dtype, base=base)
        return out if keepdim else self.reshape(out, reduced_shape(x.shape, dims, False))

    def reshape(self, x: Node, shape: tuple[int, ...]) -> Node:
        """Same elements, another shape: only used on reduced values (a free relabelling)."""
        return self.pw("cast", x, dtype=x.dtype, base=x.name, shape=shape, reshape=True)

    def norm(self, n: fx.Node, x: Any, p: Any, dim: Any, keepdim: bool) -> Any:
        if not isinstance(x, Node) or not x.shape or not x.is_float:
            return None
        dims = self.dims(x, dim)
        dtype = self.dtype_of(n)
        if p in ("fro", 2, 2.0):
            sq = self.pw("mul", x, x, dtype=x.dtype, base="sq")
            return self.pw(
                "sqrt", self.red("sum", sq, dims, keepdim, dtype), dtype=dtype, base=n.name
            )
        if p in (1, 1.0):
            return self.red("sum", self.pw("abs", x, dtype=x.dtype), dims, keepdim, dtype)
        if p == math.inf:
            return self.red("amax", self.pw("abs", x, dtype=x.dtype), dims, keepdim, dtype)
        if isinstance(p, (int, float)) and p > 0:
            powed = self.pw("pow", self.pw("abs", x, dtype=x.dtype), float(p), dtype=x.dtype)
            total = self.red("sum", powed, dims, keepdim, dtype)
            return self.pw("pow", total, 1.0 / p, dtype=dtype, base=n.name)
        return None

    def op_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.norm(n, b["input"], b["p"], b["dim"], b["keepdim"])

    def op_vector_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.norm(n, b["input"], b["ord"], b["dim"], b["keepdim"])

    def op_normalize(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        norm = self.norm(n, x, b["p"], b["dim"], True)
        if norm is None:
            return None
        clamped = self.pw("clamp", norm, b["eps"], None, dtype=norm.dtype)
        return self.pw("div", x, clamped, dtype=self.dtype_of(n), base=n.name)

    def op_cumsum(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = self.input_as(n, b["input"], b.get("dtype"))
        if x is None or not isinstance(b["dim"], int) or not x.is_float:
            return None
        dims = (b["dim"] % len(x.shape),)
        return self.red(op, x, dims, True, self.dtype_of(n), shape=x.shape, scan=True)

    op_cumprod = op_cumsum

    # -- losses ----------------------------------------------------------------------------------

    def loss(self, n: fx.Node, b: dict[str, Any], elementwise) -> Any:
        """An elementwise loss of input and target, then its reduction ('mean', 'sum', 'none').

        `elementwise(diff, dtype)` builds the per-element loss from input - target. The mean and
        sum cover every dim: a whole-tensor split reduction whose output is a 0-dim tensor.
        """
        x, y = b["input"], b["target"]
        if any(b.get(k) is not None for k in ("size_average", "reduce", "weight")):
            return None
        if not (isinstance(x, Node) and isinstance(y, Node) and x.is_float and y.is_float):
            return None
        dtype = self.dtype_of(n)
        reduction = b["reduction"]
        base = n.name if reduction == "none" else None
        diff = self.pw("sub", x, y, dtype=dtype, base="diff")
        per_element = elementwise(diff, dtype, base)
        if reduction == "none":
            return per_element
        if reduction not in ("mean", "sum"):
            return None
        dims = tuple(range(len(per_element.shape)))
        return self.red(reduction, per_element, dims, False, dtype, shape=())

    def op_mse_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.loss(
            n, b, lambda d, dtype, base: self.pw("mul", d, d, dtype=dtype, base=base or "sq")
        )

    def op_l1_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.loss(n, b, lambda d, dtype, base: self.pw("abs", d, dtype=dtype, base=base))

    def op_smooth_l1_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        beta = b["beta"]
        if not isinstance(beta, (int, float)) or beta < 0:
            return None
        if beta == 0:  # torch: exactly the L1 loss
            return self.op_l1_loss(n, op, b)
        # |d| < beta: 0.5 d^2 / beta, else |d| - 0.5 beta (torch's own formula and order)
        return self.loss(n, b, lambda d, dtype, base: self.piecewise(d, dtype, base, beta, 1.0))

    def op_huber_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        delta = b["delta"]
        if not isinstance(delta, (int, float)) or delta <= 0:
            return None
        # |d| < delta: 0.5 d^2, else delta (|d| - 0.5 delta)
        return self.loss(n, b, lambda d, dtype, base: self.piecewise(d, dtype, base, delta, delta))

    def pairwise(self, n: fx.Node, x1: Any, x2: Any, p: Any, eps: Any, keepdim: bool) -> Any:
        """torch's pairwise_distance: the p-norm of x1 - x2 + eps over the last dim."""
        if not (isinstance(x1, Node) and isinstance(x2, Node) and x1.is_float and x2.is_float):
            return None
        if not isinstance(eps, (int, float)) or not x1.shape or x1.shape != x2.shape:
            return None
        dtype = self.dtype_of(n)
        diff = self.pw("add", self.pw("sub", x1, x2, dtype=dtype, base="diff"), eps, dtype=dtype)
        return self.norm(n, diff, p, -1, keepdim)

    def op_pairwise_distance(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        return self.pairwise(n, b["x1"], b["x2"], b["p"], b["eps"], b["keepdim"])

    def op_triplet_margin_loss(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        """max(margin + d(anchor, positive) - d(anchor, negative), 0), d pairwise_distance
        (with swap, the smaller of d(anchor, negative) and d(positive, negative)), then the
        reduction, in torch's order of operations."""
        if b["size_average"] is not None or b["reduce"] is not None:
            return None
        margin, reduction = b["margin"], b["reduction"]
        if not isinstance(margin, (int, float)) or reduction not in ("mean", "sum", "none"):
            return None
        a, pos, neg = b["anchor"], b["positive"], b["negative"]
        d_pos = self.pairwise(n, a, pos, b["p"], b["eps"], False)
        d_neg = self.pairwise(n, a, neg, b["p"], b["eps"], False)
        if d_pos is None or d_neg is None:
            return None
        dtype = self.dtype_of(n)
        if b["swap"]:
            d_swap = self.pairwise(n, pos, neg, b["p"], b["eps"], False)
            if d_swap is None:
                return None
            d_neg = self.pw("minimum", d_neg, d_swap, dtype=dtype, base="d_neg")
        gap = self.pw("sub", self.pw("add", d_pos, margin, dtype=dtype), d_neg, dtype=dtype)
        base = n.name if reduction == "none" else "hinge"
        per_row = self.pw("clamp", gap, 0.0, None, dtype=dtype, base=base)
        if reduction == "none":
            return per_row
        dims = tuple(range(len(per_row.shape)))
        return self.red(reduction, per_row, dims, False, dtype, shape=())

    def op_cross_entropy(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        """(N, K) logits and (N,) class indices: logsumexp of each row (one read of the logits)
        minus the target's logit, 0 where the target is ignore_index; 'mean' divides the sum by
        the count of targets not ignored (torch's nan when all are).

        The target's logit is picked by torch (x.gather: N scattered reads); class weights,
        label smoothing, probability targets and extra dims are left to torch.
        """
        x, t, ignore = b["input"], b["target"], b["ignore_index"]
        if any(b.get(k) is not None for k in ("weight", "size_average", "reduce")):
            return None
        if b["label_smoothing"] != 0 or not isinstance(ignore, int):
            return None
        if not (isinstance(x, Node) and isinstance(t, Node) and x.is_float) or t.is_float:
            return None
        if len(x.shape) != 2 or tuple(t.shape) != (x.shape[0],):
            return None
        reduction = b["reduction"]
        if reduction not in ("mean", "sum", "none"):
            return None
        dtype = self.dtype_of(n)
        lse = self.lse(x, (1,), False, dtype, "lse")
        picked = self.make(
            TORCH,
            "gather",
            "picked",
            (x, t),
            (x.shape[0],),
            x.dtype,
            expr=f"{{0}}.gather(1, {{1}}.masked_fill({{1}} == {ignore}, 0)[:, None])[:, 0]",
        )
        valid = self.pw("ne", t, ignore, dtype=torch.bool, base="valid")
        # Row losses summed later stay fp32, as torch accumulates them (rounded to bf16 first, the
        # mean's error was four times eager's under the interpreter, then truncating bf16 stores).
        row_dtype = dtype if reduction == "none" else torch.float32
        loss = self.pw("sub", lse, picked, dtype=row_dtype, base="nll")
        base = n.name if reduction == "none" else "row_loss"
        per_row = self.pw("where", valid, loss, 0.0, dtype=row_dtype, base=base)
        if reduction == "none":
            return per_row
        total = self.red("sum", per_row, (0,), False, torch.float32, shape=())
        if reduction == "mean":
            # Counted in fp32 (exact to 2^24 rows), whatever the logits' dtype.
            counted = self.pw("where", valid, 1.0, 0.0, dtype=torch.float32, base="counted")
            count = self.red("sum", counted, (0,), False, torch.float32, shape=())
            total = self.pw("div", total, count, dtype=torch.float32, base="mean")
        # One rounding to the logits' dtype, at the end (a no-op for fp32).
        return self.make(TORCH, "cast", n.name, (total, x), (), dtype, expr="{0}.to({1}.dtype)")

    def piecewise(self, d: Node, dtype: Any, base: str | None, knot: float, scale: float):
        """Smooth L1 (scale 1: quadratic part divided by the knot) and Huber (scale = knot)."""
        a = self.pw("abs", d, dtype=dtype, base="absdiff")
        quad = self.pw("mul", self.pw("mul", d, d, dtype=dtype, base="sq"), 0.5, dtype=dtype)
        if scale == 1.0:
            quad = self.pw("div", quad, float(knot), dtype=dtype, base="quad")
        lin = self.pw("sub", a, 0.5 * knot, dtype=dtype, base="lin")
        if scale != 1.0:
            lin = self.pw("mul", lin, float(scale), dtype=dtype, base="lin")
        small = self.pw("lt", a, float(knot), dtype=torch.bool, base="small")
        return self.pw("where", small, quad, lin, dtype=dtype, base=base or "elem")
