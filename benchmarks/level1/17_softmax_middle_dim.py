"""Softmax over the channel dimension (dim 1) of a (batch_size, channels, length) tensor."""

# read B*C*L*4 bytes, write B*C*L*4 bytes (B, C, L = batch_size, channels, length): 1.07 GB
# per call; ~5 FLOP/element: 0.67 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). The reduced dim has stride L, so
# a kernel must reduce across rows of the contiguous layout (coalesce along L, loop over C).
import torch
import torch.nn as nn

batch_size = 32
channels = 1024
length = 4096


class Model(nn.Module):
    """softmax(x, dim=1): every (batch, position) column sums to one over the channels.

    Output shape: (batch_size, channels, length)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, channels, length) * 4.0]


def get_init_inputs():
    return []
