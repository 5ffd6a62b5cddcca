# An honest candidate for tasks/init_sized_state.py written as KernelBench candidates are: the
# task's size constants copied, the constructor as the task's, tanh in a Triton kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl

batch_size = 8
input_size = 32
hidden_size = 24
output_size = 16


@triton.jit
def _tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    tl.store(y_ptr + offs, tl.where(x < 0, -t, t).to(y_ptr.dtype.element_ty), mask=offs < n)


def _tanh(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _tanh_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


class ModelNew(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x, initial_hidden=None):
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = _tanh(self.i2h(combined))
        return self.h2o(self.hidden)
