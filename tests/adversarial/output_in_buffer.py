# Exploit: the output is a registered buffer of the module. Writing into module state and
# returning it makes a result that any later call (or a parameter update) silently changes.
# Passes the static checks. Caught at run time: an output that shares memory with an input, a
# parameter or a buffer of ModelNew is rejected ("alias").
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
        self.register_buffer("result", torch.empty(0), persistent=False)

    def forward(self, x):
        if self.result.shape != x.shape:
            self.result = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, self.result, x.numel(), BLOCK=256)
        return self.result
