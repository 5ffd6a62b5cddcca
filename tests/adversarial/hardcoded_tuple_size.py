# Exploit: a hard-coded element of a tuple size constant (`input_shape = (12, 40)`). The kernel
# sums rows of 40 columns at a stride of 40 whatever the input holds: right at any batch size or
# row count, wrong where the column count changes. Passes the static checks. Caught at run time:
# the other shape moves every element of the tuple ("variant", incorrect); while tuples were no
# size constants, only batch_size moved and this candidate was accepted.
import torch
import torch.nn as nn
import triton
import triton.language as tl

COLS = 40


@triton.jit
def _row_sum_kernel(x_ptr, y_ptr, numel, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    idx = row * n_cols + cols
    x = tl.load(x_ptr + idx, mask=(cols < n_cols) & (idx < numel), other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        _row_sum_kernel[(y.numel(),)](x, y, x.numel(), COLS, BLOCK=64)
        return y
