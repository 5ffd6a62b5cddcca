"""LayerNorm over a 2-D block of rows whose mask is `row_mask and col_mask` (FlagGems' style)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr
):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    cols = tl.arange(0, BC)[None, :]
    mask = (rows < n_rows) and (cols < n_cols)
    x = tl.load(x_ptr + rows * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=1)[:, None] / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=1)[:, None] / n_cols
    inv = 1.0 / tl.sqrt(var + 1e-5)
    w = tl.load(w_ptr + cols, mask=cols < n_cols)
    b = tl.load(b_ptr + cols, mask=cols < n_cols)
    tl.store(y_ptr + rows * n_cols + cols, d * inv * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        # 32 rows a program: the last block of 48 rows is partial, so the row mask matters
        grid = (triton.cdiv(rows, 32),)
        layernorm_kernel[grid](x, self.norm.weight, self.norm.bias, y, rows, n_cols, BR=32, BC=512)
        return y
