"""Row softmax compiled ahead with `kernel.warmup(...)` and launched through the compiled kernel
it returns, as a persistent kernel: a fixed number of programs walk the rows."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        z = x - tl.max(x, axis=0)
        e = tl.exp(z)
        out = e / tl.sum(e, axis=0)
        tl.store(y_ptr + row * y_stride + cols, out.to(y_ptr.dtype.element_ty), mask=mask)


def _specialization(*values):
    # What Triton specializes a compile on: an integer that is 1, and 16-divisibility of integers
    # and addresses. A kernel compiled for one of these facts is only launched where it holds.
    facts = []
    for v in values:
        if isinstance(v, torch.Tensor):
            facts.append((v.dtype, v.device, v.data_ptr() % 16 == 0))
        else:
            facts.append((v == 1, v % 16 == 0))
    return tuple(facts)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._compiled = {}

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1]).contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        num_warps = 4 if block <= 2048 else 8
        args = (x, y, n_rows, n_cols, x.stride(0), y.stride(0))
        key = (block, num_warps, _specialization(*args))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = softmax_rows_kernel.warmup(
                *args, BLOCK=block, num_warps=num_warps, grid=(1,)
            )
            compiled._init_handles()
            self._compiled[key] = compiled
        programs = max(1, min(n_rows, 64))
        # The compiled launcher takes a three-entry grid and every argument, constexprs included.
        compiled[(programs, 1, 1)](*args, block)
        return y.reshape(shape)
