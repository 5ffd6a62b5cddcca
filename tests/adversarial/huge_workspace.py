# Exploit: a workspace far beyond the task. For a 64x64 matmul the candidate reserves 50 GB of
# device memory in __init__ and touches it in forward (a lookup table, a cache, or a neighbour's
# memory taken away). The judge compares the candidate's peak with the reference's: above
# max(4x, +1 GiB) it is rejected ("memory"), unless --max-memory allows it. GPU only: on CPU
# no device memory is measured.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)
    a = tl.load(a_ptr + rows[:, None] * N + rows[None, :])
    b = tl.load(b_ptr + rows[:, None] * N + rows[None, :])
    tl.store(c_ptr + rows[:, None] * N + rows[None, :], tl.dot(a, b, input_precision="ieee"))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.workspace = None

    def forward(self, a, b):
        if self.workspace is None:
            self.workspace = torch.empty(50 * 2**30, dtype=torch.uint8, device=a.device)
        self.workspace[:1].zero_()
        c = torch.empty_like(a)
        _matmul_kernel[(1,)](a.contiguous(), b.contiguous(), c, N=a.shape[0])
        return c
