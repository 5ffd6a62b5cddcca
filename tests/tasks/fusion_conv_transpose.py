import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped ConvTranspose2d with stride, padding, output_padding and dilation, then SiLU and a
    residual add of the convolution's own output (two outputs of the group)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding):
        super().__init__()
        self.conv = nn.ConvTranspose2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
            dilation=2,
            groups=2,
        )

    def forward(self, x):
        y = self.conv(x)
        return nn.functional.silu(y) + y, y


batch_size = 2
in_channels = 8
out_channels = 32
height = 5
width = 6
kernel_size = 3
stride = 2
padding = 1
output_padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding]
