import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped Conv2d with stride, padding and dilation, then a broadcast bias, a scale and a
    clamp: the epilogue is pointwise."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=groups,
        )
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        x = (x + self.bias) * 1.5
        return torch.clamp(x, -1.0, 2.0)


batch_size = 2
in_channels = 8
out_channels = 32
height = 11
width = 13
kernel_size = 3
stride = 2
padding = 2
dilation = 2
groups = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, groups]
