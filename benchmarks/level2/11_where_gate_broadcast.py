"""torch.where against a per-column threshold, choosing between two pointwise results."""

# read 2*B*N*4 bytes of x and y and N*4 of threshold, write B*N*4 bytes
# (B = batch_size, N = dim): 1.61 GB per call; ~3 FLOP/element (compare, add, multiply):
# 0.40 GFLOP.
# H200 floor: 0.38 ms (1.61 GB at 4.25 TB/s; memory bound). Eager writes the mask and both
# branches before selecting: four extra passes.
import torch
import torch.nn as nn

batch_size = 8192
dim = 16384


class Model(nn.Module):
    """where(x > threshold[n], x + y, x * y), threshold broadcast along the rows.

    Output shape: (batch_size, dim)
    """

    def __init__(self, dim: int):
        super().__init__()
        self.threshold = nn.Parameter(torch.randn(dim) * 0.5)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.where(x > self.threshold, x + y, x * y)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
