import torch
import torch.nn as nn


class Model(nn.Module):
    """sum, mean, max/min (values and indices), argmax, argmin and prod over a middle dim and the
    last dim, with pointwise ops before and after."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        s = torch.sum(x * 2.0, dim=1) + torch.mean(x, dim=1)
        mx = x.max(dim=1)
        mn = torch.min(x, dim=-1)[0]
        am = torch.argmax(x, dim=1)
        an = torch.argmin(x.abs(), dim=-1, keepdim=True)
        p = torch.prod(1.0 + 0.1 * x, dim=-1)
        return s * mx.values, mx.indices, mn - p, am, an, torch.amax(x, dim=(1, 2))


batch_size = 3
dim1 = 9
dim2 = 11


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
