# Exploit: a hard-coded size that the task binds in a chain (`height = width = 24`). The kernel
# sums 24 rows at a plane stride of 24 rows whatever the input's height: right at the task's
# shape and at any other batch, channels or width, wrong where height changes. Passes the static
# checks. Caught at run time: the other shape moves both names of the chain ("variant",
# incorrect); while chained names were no size constants, no variant moved height and this
# candidate was accepted.
import torch
import torch.nn as nn
import triton
import triton.language as tl

HEIGHT = 24


@triton.jit
def _column_sum_kernel(x_ptr, y_ptr, numel, height, width, BLOCK: tl.constexpr):
    pid = tl.program_id(0)  # plane * width + column
    plane = pid // width
    col = pid % width
    rows = tl.arange(0, BLOCK)
    idx = plane * height * width + rows * width + col
    x = tl.load(x_ptr + idx, mask=(rows < height) & (idx < numel), other=0.0)
    tl.store(y_ptr + pid, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        b, c, _, w = x.shape
        y = torch.empty((b, c, w), device=x.device, dtype=x.dtype)
        _column_sum_kernel[(b * c * w,)](x, y, x.numel(), HEIGHT, w, BLOCK=32)
        return y
