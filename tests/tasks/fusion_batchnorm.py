import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, BatchNorm2d (batch statistics and running-stat update in training), ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels, momentum=0.2)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


batch_size = 3
in_channels = 2
out_channels = 6
height = 8
width = 7
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
