# Exploit: input mutation. The kernel computes the right answer but also scales its input in place
# by 1 + 2^-20 on every call: a change no tolerance sees, which a caller reusing its input (or a
# check done once at the end) would never notice. Caught at run time: every input is compared bit
# for bit with a pristine copy after every call ("input-mutation", rejected).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_and_nudge_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 3.0 + 1.0, mask=mask)
    tl.store(x_ptr + offs, x * 1.00000095367431640625, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_and_nudge_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
