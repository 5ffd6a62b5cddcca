"""LayerNorm whose launch settings live in a typing.NamedTuple and a collections.namedtuple
with defaults (the standard library sets the generated __new__'s defaults itself)."""

import collections
import typing

import torch
import torch.nn as nn
import triton
import triton.language as tl


class Tiling(typing.NamedTuple):
    block: int
    num_warps: int = 4
    rows_per_program: int = 1


Launch = collections.namedtuple("Launch", "grid tiling eps", defaults=(1e-5,))


@triton.jit
def layernorm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr
):
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    for i in tl.static_range(ROWS):
        row = tl.program_id(0) * ROWS + i
        if row < n_rows:
            x = tl.load(x_ptr + row * n_cols + cols, mask=col_ok, other=0.0).to(tl.float32)
            mean = tl.sum(x, axis=0) / n_cols
            d = tl.where(col_ok, x - mean, 0.0)
            var = tl.sum(d * d, axis=0) / n_cols
            out = d * (1.0 / tl.sqrt(var + eps)) * w + b
            tl.store(y_ptr + row * n_cols + cols, out.to(y_ptr.dtype.element_ty), mask=col_ok)


def plan(n_rows, n_cols, eps):
    block = triton.next_power_of_2(n_cols)
    tiling = Tiling(block, num_warps=8 if block >= 2048 else 4, rows_per_program=2)
    return Launch(grid=(triton.cdiv(n_rows, tiling.rows_per_program),), tiling=tiling, eps=eps)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1]).contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        launch = plan(n_rows, n_cols, self.norm.eps)
        t = launch.tiling
        layernorm_kernel[launch.grid](
            x,
            self.norm.weight,
            self.norm.bias,
            y,
            n_rows,
            n_cols,
            launch.eps,
            BLOCK=t.block,
            ROWS=t.rows_per_program,
            num_warps=t.num_warps,
        )
        return y.reshape(shape)
