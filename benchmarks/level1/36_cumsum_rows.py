"""Inclusive prefix sum along the last dimension of a (batch_size, dim) tensor."""

# read B*N*4 bytes, write B*N*4 bytes (B = batch_size, N = dim): 1.07 GB per call;
# 1 FLOP/element (a scan does ~2 adds per element, counted here as the serial 1): 0.13 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound).
import torch
import torch.nn as nn

batch_size = 8192
dim = 16384


class Model(nn.Module):
    """torch.cumsum(x, dim=-1).

    Output shape: (batch_size, dim)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
