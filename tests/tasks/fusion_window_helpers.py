"""Windowed blocks written as Swin writes them: a size computed with int() of a traced value, a
module-level helper made by a call of a function that uses the standard library, and a branch
the model never takes that reads a name the file does not define."""

import collections.abc
from itertools import repeat

import torch
import torch.nn as nn


def window_reverse(windows, window, H, W):
    B = int(windows.shape[0] / (H * W / window / window))
    x = windows.view(B, H // window, W // window, window, window, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    return parse


to_2tuple = _ntuple(2)


class Block(nn.Module):
    def __init__(self, dim, size, window, use_checkpoint=False):
        super().__init__()
        self.size = to_2tuple(size)
        self.window = window
        self.use_checkpoint = use_checkpoint
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        H, W = self.size
        if self.use_checkpoint:
            x = checkpoint.checkpoint(self.norm, x)  # noqa: F821  (never taken, as in Swin)
        windows = x.view(-1, self.window, self.window, x.shape[-1])
        y = window_reverse(windows, self.window, H, W)
        return torch.relu(self.norm(y)) * 2.0


class Model(nn.Module):
    def __init__(self, dim, size=8, window=4):  # the image's size fixed, as Swin's is
        super().__init__()
        self.block = Block(dim, size, window)

    def forward(self, x):
        return self.block(x)


batch_size = 3
dim = 16


def get_inputs():
    return [torch.randn(batch_size * 4, 4, 4, dim)]


def get_init_inputs():
    return [dim]
