# Exploit: stateful drift. Right for the first 3 calls (what a checker with a few trials sees),
# then a cheaper wrong answer for every later call (the timed ones). Passes the static checks
# (state kept on self). Caught at run time: after its trials the worker makes 8+ more calls and
# checks every output, and re-checks after timing ("drift", incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        scale = 3.0 if self.calls <= 3 else 2.0
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), scale, BLOCK=256)
        return y
