import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d with stride and padding, then a per-channel scale and tanh."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.scale = nn.Parameter(torch.rand(1, out_channels, 1, 1, 1) + 0.5)

    def forward(self, x):
        return torch.tanh(self.conv(x) * self.scale)


batch_size = 2
in_channels = 4
out_channels = 16
depth = 3
height = 4
width = 3
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
