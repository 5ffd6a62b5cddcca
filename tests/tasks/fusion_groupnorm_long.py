import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Group norms whose groups are longer than a row kernel's register block (the split path),
    as a function with a fixed group count and as a module, beside one with short groups."""

    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(1, channels)
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        a = F.group_norm(x, 2, self.weight, self.bias, eps=1e-3)
        b = torch.relu(self.norm(x * 2.0))
        short = F.group_norm(x, 4)
        return a, b, short


batch_size = 2
channels = 4
height = 91
width = 91


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 2.0 + 3.0]


def get_init_inputs():
    return [channels]
