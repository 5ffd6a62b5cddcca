# Crash: a wild pointer inside the kernel (a realistic indexing bug, or a deliberate segfault that
# needs no ctypes). Under the Triton interpreter the load dereferences unmapped host memory and the
# worker dies of SIGSEGV (on a GPU: an illegal memory access). Passes the static checks. Caught at
# run time: the pool reports "crashed" with rule "signal", keeps the faulthandler stack for the
# critic, and replaces the worker.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs + (1 << 40), mask=mask)  # 1 TiB past the input
    tl.store(y_ptr + offs, x * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
