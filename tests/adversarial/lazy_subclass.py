# Exploit: a lazy tensor subclass. forward returns a torch.Tensor subclass whose
# __torch_function__ runs the real computation only when somebody operates on the result (the
# evaluator's comparison, outside the timed region). Caught statically ("tensor-subclass"), and at
# run time ("output-type") with the static checks skipped: an output must be exactly
# torch.Tensor, checked before any operation touches it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class LazyResult(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y.as_subclass(LazyResult)
