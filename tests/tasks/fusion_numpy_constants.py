"""Constants computed with numpy in __init__, as Swin V2 computes its log-spaced coordinate table
(`... / np.log2(8)`): a buffer of a helper module and a scale of Model's own. A candidate cannot
import numpy; the offline coder writes each such constant as its value."""

import numpy as np
import torch
import torch.nn as nn


class Table(nn.Module):
    def __init__(self, dim):
        super().__init__()
        coords = torch.arange(dim, dtype=torch.float32) - dim / 2
        table = torch.sign(coords) * torch.log2(torch.abs(coords) + 1.0) / np.log2(8)
        self.register_buffer("table", table)

    def forward(self, x):
        return x + self.table


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.table = Table(dim)
        self.scale = np.sqrt(2.0) * np.pi

    def forward(self, x):
        return torch.sigmoid(self.table(x) * self.scale)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
