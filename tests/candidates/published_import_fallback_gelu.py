"""GELU (tanh) through libdevice.tanh, imported from wherever this Triton version keeps it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:  # triton >= 3.0 keeps libdevice here; older releases only under extra.cuda
    from triton.language.extra.libdevice import tanh
except (ImportError, ModuleNotFoundError):
    from triton.language.extra.cuda.libdevice import tanh


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + tanh(inner)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
