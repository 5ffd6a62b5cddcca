"""Rectangular everything: a Conv2d and a ConvTranspose2d whose kernel, stride, padding and
dilation differ between height and width (a kernel index with its axes swapped is wrong here)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, 16, (2, 5), stride=(1, 2), padding=(1, 2), dilation=(2, 1))
        self.up = nn.ConvTranspose2d(16, channels, (3, 2), stride=(2, 1), padding=(1, 0))

    def forward(self, x):
        return self.up(torch.relu(self.conv(x))) * 0.5


batch_size = 2
channels = 4
height = 7
width = 12


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
