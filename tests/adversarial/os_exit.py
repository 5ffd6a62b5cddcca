# Exploit: os._exit mid-run. forward prints PASS and ends the process with status 0, skipping
# every check after the call (no exception to catch, no finally blocks run). Caught statically
# ("import": os), and at run time with the static checks skipped: the pool sees its worker die
# without a reply and reports "crashed" with rule "exit"; the next candidate gets a fresh worker.
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        print("PASS", flush=True)
        os._exit(0)
