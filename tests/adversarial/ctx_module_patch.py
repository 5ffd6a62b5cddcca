# Exploit: an autograd "ctx" that is a module. ctx.name = value is allowed on the ctx parameter of
# a torch.autograd.Function's forward, so the exploit calls forward itself with torch.cuda as ctx
# and patches synchronize out of the harness's timer. Caught statically ("monkeypatch": a Function
# class referenced other than as F.apply gets the plain store rule), and at run time
# ("monkeypatch") with the static checks skipped: the integrity snapshot sees the patched sync.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class Affine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.synchronize = lambda *args, **kwargs: None
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return Affine.forward(torch.cuda, x)
