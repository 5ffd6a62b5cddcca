# Exploit: output cached by data_ptr. The first call for an input address computes the answer;
# later calls with a tensor at the same address return the cached output without launching the
# work again, which is right only if the caller never writes new values into the same tensor.
# Passes the static checks (a module-level dict is allowed). Caught at run time: the worker calls
# again on the same input tensors refilled with new values, and keeps the storages of earlier
# outputs ("reuse": the cached tensor is an earlier output's memory; or "mismatch": stale values).
import torch
import torch.nn as nn
import triton
import triton.language as tl

_CACHE = {}


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in _CACHE:
            y = torch.empty_like(x)
            _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
            _CACHE[key] = y
        else:
            _affine_kernel[(1,)](x, torch.empty(1, device=x.device), 0, BLOCK=256)
        return _CACHE[key]
