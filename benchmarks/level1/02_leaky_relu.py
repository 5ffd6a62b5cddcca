"""LeakyReLU with a non-default negative slope on an NCHW activation map."""

# read B*C*H*W*4 bytes, write B*C*H*W*4 bytes (B, C, H, W = batch_size, channels, height, width):
# 1.07 GB per call; ~2 FLOP/element (compare, multiply): 0.27 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound, half that in bf16/fp16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 256
height = 128
width = 128
negative_slope = 0.05


class Model(nn.Module):
    """x where x >= 0, else negative_slope * x.

    Output shape: (batch_size, channels, height, width)
    """

    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [negative_slope]
