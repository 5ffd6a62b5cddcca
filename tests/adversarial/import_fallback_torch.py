# Exploit: an import fallback that falls back to torch. A try whose body and handlers only import
# Triton names is allowed (libdevice moved between Triton versions); this one's handler imports
# torch's gelu under the kernel helper's name, so on a Triton without the module the "kernel"
# would be PyTorch. Caught statically ("try": a fallback must import from triton only).
import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from triton.language.extra.libdevice import tanh
except ImportError:
    from torch import tanh


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 3.0 + 1.0 + 0.0 * tanh(x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
