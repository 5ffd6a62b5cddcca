# Exploit: hard-coded sizes. The launcher bakes in the task's default shape (16 x 96): the
# output always has that shape and the grid covers exactly that many elements, which is right
# at the one shape a checker tries. Passes the static checks. Caught at run time: correctness is
# also judged at another shape where every size constant differs ("variant", incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS, COLS = 16, 96


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, n_in, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n_in, other=0.0)
    tl.store(y_ptr + offs, x * 3.0 + 1.0, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty((ROWS, COLS), device=x.device, dtype=x.dtype)
        _affine_kernel[(triton.cdiv(ROWS * COLS, 256),)](
            x.contiguous(), y, ROWS * COLS, x.numel(), BLOCK=256
        )
        return y
