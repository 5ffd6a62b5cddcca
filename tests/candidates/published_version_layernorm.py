"""LayerNorm that reads triton.__version__ to pick its launch settings."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TRITON_VERSION = tuple(int(part) for part in triton.__version__.split(".")[:2])
# Older Triton releases spill this row kernel at 8 warps; newer ones do not.
NUM_WARPS = 8 if TRITON_VERSION >= (3, 0) else 4


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * n_cols + cols, d * rstd * w + b, mask=mask)


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
        layernorm_kernel[(rows,)](
            x,
            self.norm.weight,
            self.norm.bias,
            y,
            n_cols,
            self.norm.eps,
            BLOCK=block,
            num_warps=NUM_WARPS,
        )
        return y
