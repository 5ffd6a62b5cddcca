# Exploit: a Triton kernel for show. The file defines a @triton.jit kernel (which satisfies a
# static "has a kernel" check) but forward computes with PyTorch and never launches it. Passes the
# static checks. Caught at run time: the worker counts launches of kernels defined in the
# candidate's own file during each call ("no-triton-launch", rejected).
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
        return x * 3.0 + 1.0
