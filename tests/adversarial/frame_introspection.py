# Exploit: frame introspection. forward walks up the call stack into the evaluator's frames and
# returns a reference output it finds in their locals. Caught statically ("import": sys), and at
# run time ("sandbox-introspection") with the static checks skipped: the audit hook denies
# sys._getframe (and inspect.currentframe) to candidate code.
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _noop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


def _stolen(shape):
    frame = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(shape):
                return value.clone()
        frame = frame.f_back
    raise RuntimeError("nothing to steal")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _noop_kernel[(1,)](x, 0, BLOCK=256)
        return _stolen(x.shape)
