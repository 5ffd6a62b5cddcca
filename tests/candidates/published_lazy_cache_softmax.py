"""Persistent row softmax: one program per SM, the SM count read once into a module-level cache."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_sm_count = None


def sm_count(device):
    """The device's multiprocessor count, queried once (a driver call per forward is slow)."""
    global _sm_count
    if _sm_count is None:
        if device.type == "cuda":
            _sm_count = torch.cuda.get_device_properties(device).multi_processor_count
        else:
            _sm_count = 4  # the interpreter: a few programs, each looping over rows
    return _sm_count


@triton.jit
def softmax_persistent_kernel(x_ptr, y_ptr, stride, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        programs = min(n_rows, sm_count(x.device))
        block = triton.next_power_of_2(n_cols)
        softmax_persistent_kernel[(programs,)](x, y, x.stride(0), n_rows, n_cols, BLOCK=block)
        return y
