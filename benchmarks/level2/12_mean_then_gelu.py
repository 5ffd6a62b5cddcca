"""A mean over the middle dimension followed by a bias add and GELU: a reduction, then pointwise."""

# read B*D1*D2*4 bytes, read D2*4 bytes of bias, write B*D2*4 bytes (B, D1, D2 = batch_size,
# dim1, dim2): 1.07 GB per call; ~1 FLOP/element read (the GELU runs on the small output):
# 0.27 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
dim1 = 2048
dim2 = 1024


class Model(nn.Module):
    """gelu(mean(x, dim=1) + bias).

    Output shape: (batch_size, dim2)
    """

    def __init__(self, dim2: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim2) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.mean(x, dim=1) + self.bias)


def get_inputs():
    # A per-row offset keeps the means away from zero, where GELU is nearly linear.
    return [torch.randn(batch_size, dim1, dim2) + torch.randn(batch_size, 1, dim2)]


def get_init_inputs():
    return [dim2]
