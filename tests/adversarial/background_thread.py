# Exploit: a background thread. forward returns its output at once and a thread fills it in
# later, so the timed call does no work. Caught statically ("import": threading is not allowed),
# and at run time ("thread") with the static checks skipped: the worker lists the Python threads
# after every candidate call and rejects a candidate that left one running.
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


def _fill_later(x, y):
    threading.Event().wait(2.0)  # long after the caller stopped its timer
    _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        threading.Thread(target=_fill_later, args=(x, y), daemon=True).start()
        return y
