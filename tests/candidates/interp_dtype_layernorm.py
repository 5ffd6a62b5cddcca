"""LayerNorm whose helper takes the accumulation dtype as a constexpr and reads `dtype.value`."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def load_as(ptr, offs, mask, dt: tl.constexpr):
    return tl.load(ptr + offs, mask=mask, other=0.0).to(dt.value)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, ACC: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = load_as(x_ptr, row * n_cols + cols, mask, ACC)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    inv = 1.0 / tl.sqrt(var + 1e-5)
    w = load_as(w_ptr, cols, mask, ACC)
    b = load_as(b_ptr, cols, mask, ACC)
    tl.store(y_ptr + row * n_cols + cols, d * inv * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        block = triton.next_power_of_2(n_cols)
        w, b = self.norm.weight, self.norm.bias
        layernorm_kernel[(rows,)](x, w, b, y, n_cols, BLOCK=block, ACC=tl.float32)
        return y
