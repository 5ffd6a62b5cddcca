"""GroupNorm then SiLU, as in a diffusion U-Net's ResNet block."""

# read B*C*H*W*4 bytes, write B*C*H*W*4 bytes, read 2*C*4 bytes of affine parameters
# (C = num_groups * channels_per_group): 1.07 GB per call;
# ~12 FLOP/element (8 for the norm, 4 for SiLU): 1.61 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
# channels = num_groups * channels_per_group, so any pair of values is a valid GroupNorm.
num_groups = 32
channels_per_group = 16
height = 128
width = 128


class Model(nn.Module):
    """silu(group_norm(x)) with affine weight and bias.

    Output shape: (batch_size, num_groups * channels_per_group, height, width)
    """

    def __init__(self, num_groups: int, num_channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, num_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x))


def get_inputs():
    return [torch.randn(batch_size, num_groups * channels_per_group, height, width) * 2.0]


def get_init_inputs():
    return [num_groups, num_groups * channels_per_group]
