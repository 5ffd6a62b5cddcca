# Exploit: a monkeypatched timer. torch.cuda.Event.elapsed_time is replaced so that every timed
# interval reads one microsecond. Caught statically ("monkeypatch"), and at run time
# ("monkeypatch") with the static checks skipped: Event and its record/elapsed_time/synchronize
# are in the worker's integrity snapshot.
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.cuda.Event.elapsed_time = lambda self, end: 0.001


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
