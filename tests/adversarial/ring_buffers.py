# Exploit (issue 29): a ring of RING persistent output buffers in a plain Python list (not
# registered buffers: model.buffers() and the alias check never see them), handed out in turn.
# Each call overwrites the result returned RING calls earlier, which a caller may still hold.
# Caught by the judge's reuse check: RING+1 or more outputs held at once, each read again after
# the last call ("reuse"), whatever RING is up to the calls held (EvalConfig.reuse_calls).
import torch
import torch.nn as nn
import triton
import triton.language as tl

RING = 4


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ring = []
        self.calls = 0

    def forward(self, x):
        if len(self.ring) < RING or self.ring[0].shape != x.shape:
            self.ring = [torch.empty_like(x) for _ in range(RING)]
        y = self.ring[self.calls % RING]
        self.calls += 1
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
