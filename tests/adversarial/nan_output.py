# Exploit: NaN everywhere. A comparison written as `not (abs(out - ref) > tol).any()` passes NaN,
# since every comparison with NaN is false. Passes the static checks. Caught at run time: NaN or
# Inf where the reference is finite fails the comparison ("nan", incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _nan_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.full((BLOCK,), float("nan"), tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _nan_kernel[(triton.cdiv(x.numel(), 256),)](y, x.numel(), BLOCK=256)
        return y
