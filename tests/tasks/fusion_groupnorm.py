import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, GroupNorm, Swish, then a per-channel multiply."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.weight = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x):
        x = self.group_norm(self.conv(x))
        x = x * torch.sigmoid(x)
        return x * self.weight


batch_size = 2
in_channels = 3
out_channels = 8
height = 7
width = 6
kernel_size = 3
num_groups = 4


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
