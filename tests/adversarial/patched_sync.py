# Exploit: a monkeypatched synchronize. Replacing torch.cuda.synchronize with a no-op makes a
# harness that syncs before reading its timer measure only the launch. Caught statically
# ("monkeypatch"), and at run time ("monkeypatch") with the static checks skipped: the worker
# compares the identity of torch.cuda.synchronize (and ~500 other functions) with a snapshot
# after every stretch of candidate code.
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.cuda.synchronize = lambda *args, **kwargs: None


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
