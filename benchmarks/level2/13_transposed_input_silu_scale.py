"""SiLU and a per-column scale on a transposed (non-contiguous) input view."""

# read B*N*4 bytes, read N*4 bytes of scale, write B*N*4 bytes (B = batch_size, N = dim):
# 1.07 GB per call; ~5 FLOP/element: 0.67 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). The input is a (dim, batch_size)
# buffer seen through .t(): a kernel that assumes row-major strides reads the wrong elements,
# and one that walks the logical rows reads with a stride of batch_size * 4 bytes.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 16384


class Model(nn.Module):
    """silu(x) * scale[n] on x of logical shape (batch_size, dim), strides (1, batch_size).

    Output shape: (batch_size, dim)
    """

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x) * self.scale


def get_inputs():
    return [torch.randn(dim, batch_size).t()]


def get_init_inputs():
    return [dim]
