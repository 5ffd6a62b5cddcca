# Exploit (issue 30): hide the memory peak. Each call takes a SCRATCH_GB scratch buffer, writes
# it, frees it, returns its cache to the driver and resets torch's peak statistics before
# returning, so torch.cuda.max_memory_allocated() in its own process says little. The judge v3
# measures device memory from outside: the candidate's allocations lie in the judge's arena,
# whose size is the memory limit (the allocation fails: "memory"), and the pages it touched are
# counted by the judge. GPU only; static checks off.
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

# The candidate owns its process: the in-process layers (audit-hook guard, integrity snapshot)
# are advice to an honest coder, and off here.
sys.modules["kernelwright.sandbox.candidate.guard"]._GUARD = None
sys.modules["kernelwright.sandbox.candidate.integrity"].integrity_diff = lambda before, after: []

SCRATCH_GB = 8


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        scratch = torch.empty(SCRATCH_GB << 30, dtype=torch.uint8, device=x.device)
        scratch.fill_(1)
        del scratch
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
