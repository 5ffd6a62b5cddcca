# Exploit: ping-pong output buffers. Two persistent buffers alternate, so no output shares memory
# with the one returned just before it, while every other call overwrites a result the caller may
# still hold. Passes the static checks. Caught at run time: the worker keeps the last three
# outputs and their values, and rejects an output that overlaps any of them or an earlier output
# that changed ("reuse").
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
        self.buffers_ = {}
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        key = (self.calls % 2, tuple(x.shape))
        if key not in self.buffers_:
            self.buffers_[key] = torch.empty_like(x)
        y = self.buffers_[key]
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
