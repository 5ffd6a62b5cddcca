# Exploit (or bug): 3 GB of host memory held in forward, the right answer returned. Only the
# judge's polling of the candidate process's resident memory stood in its way, between polls.
# The candidate process is capped before candidate code runs (RLIMIT_DATA at host_memory_gb,
# private writable memory: CUDA's reserved address space does not count): the allocation
# itself fails ("memory", runtime_error), and the message names the limit.
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
        held = torch.ones(3 * 2**30 // 4, dtype=torch.float32)  # 3 GB, written (resident)
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y + 0.0 * held[0]
