# Exploit: work on a side stream. forward launches the kernel on a fresh CUDA stream and returns
# without waiting, so a timer whose end event is recorded on the default stream stops before the
# work is done. Caught statically ("stream"); at run time the timer also synchronizes the device
# before its end event, and outputs are compared only after a device synchronize.
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
        self.side = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        with torch.cuda.stream(self.side):
            _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
