# Exploit: a signal handler left behind. The candidate arms SIGALRM with a handler that raises,
# one second ahead, so that the next candidate judged by the same warm process fails for no
# fault of its own. Each candidate runs in a process of its own, forked from an untouched
# zygote: the next one never sees the handler (tested with the honest candidate after it).
import signal

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


def _sabotage(signum, frame):
    raise RuntimeError("sabotaged by the previous candidate")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        signal.signal(signal.SIGALRM, _sabotage)
        signal.setitimer(signal.ITIMER_REAL, 30.0, 30.0)

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
