# Exploit: an output of the wrong dtype. A float64 result compares "close" to the float32
# reference under torch.allclose, which casts and broadcasts, while hiding whatever the kernel
# really computed. Passes the static checks. Caught at run time: shape, dtype and device are
# checked exactly before any value comparison ("dtype", incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y.double()
