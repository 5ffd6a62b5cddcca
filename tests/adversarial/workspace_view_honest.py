# Exploit (the control of issue 29, honest): the output is a view of a workspace allocated fresh
# on every call (a padded buffer, the result its leading part). Nothing is reused: accepted.
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
        work = torch.empty(x.numel() + 1024, dtype=x.dtype, device=x.device)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x.contiguous(), work, x.numel(), BLOCK=256)
        return work[: x.numel()].view(x.shape)
