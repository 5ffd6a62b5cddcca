"""Eval-mode batch norm feeding a mean over the spatial dims: the running statistics are per
channel, the rows are batch x channel."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.mean(self.bn(x), dim=(2, 3))


batch_size = 4
c = 6


def get_inputs():
    return [torch.randn(batch_size, c, 5, 7)]


def get_init_inputs():
    return [c]
