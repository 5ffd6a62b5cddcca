# Exploit: returning a view of a persistent buffer. The output lives in one buffer allocated at
# construction and is rewritten by every call, so a caller holding an earlier result sees it
# change (and the allocation is hidden from the timed region). Passes the static checks. Caught
# at run time: an output whose memory overlaps an earlier call's output is rejected ("reuse").
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
        self.scratch = None

    def forward(self, x):
        if self.scratch is None or self.scratch.numel() < x.numel():
            self.scratch = torch.empty(x.numel() * 2, device=x.device, dtype=x.dtype)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, self.scratch, x.numel(), BLOCK=256)
        return self.scratch[: x.numel()].view(x.shape)
