"""Row softmax through a small op object: its settings in __init__, the launch in __call__."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)


class RowSoftmax:
    """softmax(x, dim=-1) for a 2-D tensor; callable like the torch function it replaces."""

    def __init__(self, num_warps=4):
        self.num_warps = num_warps

    def __call__(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](x, y, x.stride(0), n_cols, BLOCK=block, num_warps=self.num_warps)
        return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = RowSoftmax(num_warps=4)

    def forward(self, x):
        return self.softmax(x)
