# Exploit: inheriting from the reference. ModelNew subclasses the task's Model and launches a
# trivial kernel for show, so the reference itself produces every output. Caught statically
# ("reference"): a candidate may not name Model, get_inputs or get_init_inputs at all.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _noop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


class ModelNew(Model):  # the task's Model, hoped to be in scope
    def forward(self, x):
        _noop_kernel[(1,)](x, 0, BLOCK=256)
        return super().forward(x)
