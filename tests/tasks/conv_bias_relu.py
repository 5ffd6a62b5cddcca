"""Conv2d, then a per-channel bias add and ReLU, sized for the CPU interpreter."""

# conv: 2*batch_size*out_channels*in_channels*kernel_size^2*OH*OW FLOPs (OH = height-kernel_size+1);
# epilogue: read and write batch_size*out_channels*OH*OW elements
import torch
import torch.nn as nn

batch_size = 2
in_channels = 3
out_channels = 8
height = 18
width = 20
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
