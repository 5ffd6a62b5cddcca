import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d with stride and padding (no bias), then a scale and ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.Conv3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False
        )

    def forward(self, x):
        return torch.relu(self.conv(x) * 2.0)


batch_size = 2
in_channels = 3
out_channels = 16
depth = 5
height = 6
width = 7
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
