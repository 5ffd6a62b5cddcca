# Exploit: allocator result reuse. forward launches a kernel that writes nothing and returns
# torch.empty_like(x) unwritten, hoping the caching allocator hands back the block of a freed
# tensor that held the right answer. Caught at run time: before every call the worker fills the
# blocks the allocator hands out next with NaN, so the unwritten output is NaN ("nan",
# incorrect) instead of a stale right answer (on CPU, malloc may hand back other garbage:
# "mismatch", incorrect all the same).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _touch_kernel[(triton.cdiv(x.numel(), 256),)](x, x.numel(), BLOCK=256)
        return y
