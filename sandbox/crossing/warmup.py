"""A trusted Triton kernel each worker compiles and launches once, before any candidate runs.

Triton builds its launcher stubs (with the C compiler, on a GPU) and loads its driver on first
use; doing that outside the sandbox guard keeps those files and subprocesses out of the
candidate's accounting and out of its first-compile latency.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


def warm_up(device) -> None:
    import torch

    x = torch.arange(256, dtype=torch.float32, device=device)
    out = torch.empty_like(x)
    _scale_kernel[(2,)](x, out, x.numel(), BLOCK=128)
    if out.is_cuda:
        torch.cuda.synchronize()
    if not torch.equal(out, x * 2):
        raise RuntimeError("Triton warm-up kernel gave a wrong result: the toolchain is broken")
