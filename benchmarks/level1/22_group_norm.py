"""GroupNorm on an NCHW activation map, channels given as groups x channels per group."""

# read B*C*H*W*4 bytes, write B*C*H*W*4 bytes, read 2*C*4 bytes of affine parameters
# (C = num_groups * channels_per_group): 1.07 GB per call;
# ~8 FLOP/element (mean, variance, normalize, per-channel scale and shift): 1.07 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). One group of one sample is
# channels_per_group * height * width = 131072 elements: too large for one program's registers.
import torch
import torch.nn as nn

batch_size = 32
# channels = num_groups * channels_per_group, so any pair of values is a valid GroupNorm.
num_groups = 32
channels_per_group = 8
height = 128
width = 128
eps = 1e-5


class Model(nn.Module):
    """nn.GroupNorm(num_groups, num_channels) with affine weight and bias.

    Output shape: (batch_size, num_groups * channels_per_group, height, width)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, num_channels, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, num_groups * channels_per_group, height, width) + 1.0]


def get_init_inputs():
    return [num_groups, num_groups * channels_per_group, eps]
