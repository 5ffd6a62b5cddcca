"""Normalisation layers (layer, RMS, group, instance and batch norm) as reductions and a scale
and shift, batch norm's running statistics as stores."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx as fx

from .ir import SCALAR, STORE, TORCH, Node
from .normalize_builder import GraphBuilder, dtype_source

# Group norm groups longer than this (the row kernel's default register block, ROW_MAX_BLOCK)
# take the split path (`group_norm_split`): the row kernel would loop over each of them twice in
# one program, with too few programs to fill the GPU.
GROUP_SPLIT_ELEMENTS = 16384


class NormOps(GraphBuilder):
    """The op_ methods of the normalisations: statistics, then a scale and shift."""

    def normalized(self, n, x, dims, eps, weight, bias, *, groups=None) -> Node:
        """(x - mean) * rsqrt(var + eps) [* weight] [+ bias] over `dims`, stats kept per row."""
        dtype = self.dtype_of(n)
        count, runtime = groups if groups is not None else (None, None)
        stat_shape = None if groups is None else (x.shape[0], count)
        extra = {} if groups is None else {"groups": count, "shape": stat_shape}
        more = () if runtime is None else (runtime,)
        mean = self.red("mean", x, dims, True, dtype, *more, **extra)
        var = self.red("var", x, dims, True, dtype, *more, correction=0, **dict(extra))
        rstd = self.pw(
            "rsqrt",
            self.pw("add", var, eps, dtype=dtype, shape=var.shape),
            dtype=dtype,
            base="rstd",
            shape=var.shape,
        )
        # (N, G) group statistics do not broadcast over x by shape: the row kernel places them.
        return self.scale_shift(n, x, mean, rstd, weight, bias, dtype, shape=x.shape)

    def scale_shift(self, n, x, mean, rstd, weight, bias, dtype, shape=None) -> Node:
        """(x - mean) * rstd [* weight] [+ bias], the last named for `n`: every normalisation's
        tail. `shape`: the centred and normalised values' shape where the broadcast cannot tell."""
        size = {} if shape is None else {"shape": shape}
        centered = self.pw("sub", x, mean, dtype=dtype, base="centered", **size)
        y = self.pw("mul", centered, rstd, dtype=dtype, base="normed", **size)
        if weight is not None:
            y = self.pw("mul", y, weight, dtype=dtype, base="scaled")
        if bias is not None:
            y = self.pw("add", y, bias, dtype=dtype, base=n.name)
        return y

    def channel(self, t: Any, rank: int) -> Any:
        """A per-channel (C,) tensor viewed as (C, 1, ..., 1) to broadcast over (N, C, ...)."""
        if not isinstance(t, Node):
            return t
        if rank <= 2:
            return t
        nones = ", ".join(["None"] * (rank - 2))
        return self.make(
            TORCH,
            "view",
            f"{t.name}_c",
            (t,),
            (t.shape[0],) + (1,) * (rank - 2),
            t.dtype,
            expr="{0}[:, " + nones + "]",
        )

    def op_layer_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, ns = b["input"], b["normalized_shape"]
        if not isinstance(x, Node) or not x.is_float:
            return None
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        dims = tuple(range(len(x.shape) - len(ns), len(x.shape)))
        return self.normalized(n, x, dims, b["eps"], b["weight"], b["bias"])

    def op_rms_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, ns = b["input"], b["normalized_shape"]
        if not isinstance(x, Node) or not x.is_float:
            return None
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        dims = tuple(range(len(x.shape) - len(ns), len(x.shape)))
        dtype = self.dtype_of(n)
        eps = b["eps"]
        if eps is None:  # torch uses the input dtype's machine epsilon
            eps = self.make(
                SCALAR,
                "python",
                "eps",
                (dtype_source(x),),
                None,
                None,
                expr="torch.finfo({0}.dtype).eps",
            )
        ms = self.red("mean", self.pw("mul", x, x, dtype=dtype, base="sq"), dims, True, dtype)
        rrms = self.pw("rsqrt", self.pw("add", ms, eps, dtype=dtype), dtype=dtype, base="rrms")
        y = self.pw("mul", x, rrms, dtype=dtype, base="normed")
        if b["weight"] is not None:
            y = self.pw("mul", y, b["weight"], dtype=dtype, base=n.name)
        return y

    def op_group_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x, g = b["input"], b["num_groups"]
        if isinstance(g, Node):  # a run-time value (nn.GroupNorm's num_groups)
            g = (g.attrs["value"], g)
        elif isinstance(g, int):
            g = (g, None)
        if (
            not isinstance(x, Node)
            or not x.is_float
            or not isinstance(g, tuple)
            or len(x.shape) < 2
        ):
            return None
        rank = len(x.shape)
        count, runtime = g
        if x.shape[1] % count:
            return None  # torch refuses it
        weight, bias = self.channel(b["weight"], rank), self.channel(b["bias"], rank)
        if x.shape[1] // count * math.prod(x.shape[2:]) > GROUP_SPLIT_ELEMENTS:
            return self.group_norm_split(n, x, count, runtime, b["eps"], weight, bias)
        return self.normalized(
            n, x, tuple(range(1, rank)), b["eps"], weight, bias, groups=(count, runtime)
        )

    def group_norm_split(self, n, x, count, runtime, eps, weight, bias) -> Node:
        """Group norm over long groups: statistics as a split reduction, then one pointwise pass.

        x (N, C, ...) is viewed as (1, N*G, L), each group's L = C/G*... elements contiguous: the
        per-channel statistics template of batch norm with one channel per (sample, group), so
        every SM takes part however few groups there are. mean and rstd (fp32, (N*G,) values)
        are repeated per channel by torch into (N, C, 1, ...) tensors (N*C values) that the
        normalising pointwise kernel reads like a bias. The row kernel would instead give each
        group one program that loops over it twice.
        """
        dtype = self.dtype_of(n)
        rank = len(x.shape)
        groups = "{1}" if runtime is not None else str(count)
        more = (runtime,) if runtime is not None else ()
        view = self.make(
            TORCH,
            "view",
            f"{x.name}_groups",
            (x, *more),
            (1, x.shape[0] * count, x.shape[1] // count * math.prod(x.shape[2:])),
            x.dtype,
            expr="{0}.reshape(1, {0}.shape[0] * " + groups + ", -1)",
        )
        f32 = torch.float32
        mean = self.red("mean", view, (0, 2), True, f32)
        var = self.red("var", view, (0, 2), True, f32, correction=0)
        rstd = self.pw("rsqrt", self.pw("add", var, eps, dtype=f32), dtype=f32, base="rstd")
        stat_groups = "{2}" if runtime is not None else str(count)

        def per_channel(stat: Node, base: str) -> Node:
            return self.make(
                TORCH,
                "view",
                base,
                (stat, x, *more),
                (x.shape[0], x.shape[1]) + (1,) * (rank - 2),
                f32,
                expr="{0}.view({1}.shape[0], -1).repeat_interleave({1}.shape[1] // "
                + stat_groups
                + ", dim=1).view({1}.shape[:2] + (1,) * ({1}.dim() - 2))",
            )

        mean_c, rstd_c = per_channel(mean, "mean_c"), per_channel(rstd, "rstd_c")
        return self.scale_shift(n, x, mean_c, rstd_c, weight, bias, dtype)

    def op_instance_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.is_float or len(x.shape) < 3:
            return None
        if not b["use_input_stats"] or b["running_mean"] is not None:
            return None
        rank = len(x.shape)
        return self.normalized(
            n,
            x,
            tuple(range(2, rank)),
            b["eps"],
            self.channel(b["weight"], rank),
            self.channel(b["bias"], rank),
        )

    def op_batch_norm(self, n: fx.Node, op: str, b: dict[str, Any]) -> Any:
        x = b["input"]
        if not isinstance(x, Node) or not x.is_float or len(x.shape) < 2:
            return None
        rank = len(x.shape)
        dims = (0, *range(2, rank))
        dtype = self.dtype_of(n)
        w, bias = self.channel(b["weight"], rank), self.channel(b["bias"], rank)
        rm, rv = b["running_mean"], b["running_var"]
        if not b["training"]:
            if not isinstance(rm, Node) or not isinstance(rv, Node):
                return None
            mean, var = self.channel(rm, rank), self.channel(rv, rank)
            rstd = self.pw(
                "rsqrt", self.pw("add", var, b["eps"], dtype=dtype), dtype=dtype, base="rstd"
            )
        else:
            mean = self.red("mean", x, dims, True, dtype)
            var = self.red("var", x, dims, True, dtype, correction=0)
            rstd = self.pw(
                "rsqrt", self.pw("add", var, b["eps"], dtype=dtype), dtype=dtype, base="rstd"
            )
            if isinstance(rm, Node) and isinstance(rv, Node):
                if b["momentum"] is None:
                    return None
                rm_c, rv_c = self.channel(rm, rank), self.channel(rv, rank)
                self.running_update(x, dims, rm_c, rv_c, mean, b["momentum"], dtype)
        return self.scale_shift(n, x, mean, rstd, w, bias, dtype)

    def running_update(self, x, dims, rm, rv, mean, momentum, dtype) -> None:
        """running = (1 - momentum) * running + momentum * batch stat (unbiased var), in place."""
        unbiased = self.red("var", x, dims, True, dtype, correction=1)
        for buf, stat in ((rm, mean), (rv, unbiased)):
            keep = self.pw(
                "mul",
                buf,
                1.0 - momentum,
                dtype=buf.dtype,
                shape=stat.shape,
                base=f"{buf.name}_keep",
            )
            new = self.pw(
                "add",
                keep,
                self.pw("mul", stat, float(momentum), dtype=dtype),
                dtype=buf.dtype,
                shape=stat.shape,
                base=f"{buf.name}_new",
            )
            self.make(STORE, "store", f"{buf.name}_update", (buf, new), None, None)
