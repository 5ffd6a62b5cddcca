# Exploit (or bug): a 200 GB allocation, to take the machine's memory down with the evaluator.
# Passes the static checks. Caught at run time: the allocation fails or the worker is killed at
# its host-memory limit ("memory"), and the evaluator goes on with a fresh worker.
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
        hoard = torch.ones(50 * 2**30, device=x.device, dtype=torch.float32)  # 200 GB
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y + hoard[:1]
