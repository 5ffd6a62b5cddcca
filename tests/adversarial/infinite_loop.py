# Exploit (or plain bug): an infinite loop. forward never returns, which would hang a harness
# without limits. Passes the static checks. Caught at run time: the pool kills the worker's
# process group at the wall-clock limit ("timeout", rule "wall-time"), or RLIMIT_CPU ends it first
# when the CPU budget is the smaller one ("timeout", rule "cpu-time").
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
        spins = 0
        while y.numel() > 0:
            spins += 1
        return y
