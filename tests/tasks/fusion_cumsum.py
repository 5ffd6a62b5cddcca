import torch
import torch.nn as nn


class Model(nn.Module):
    """Masked cumulative sum over dim 1 and a cumulative product over the last dim."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        a = torch.cumsum(x * mask, dim=self.dim)
        b = torch.cumprod(1.0 + 0.05 * x, dim=-1)
        return a + b


batch_size = 3
length = 30
channels = 4


def get_inputs():
    return [
        torch.randn(batch_size, length, channels),
        torch.randn(batch_size, length, channels) > 0,
    ]


def get_init_inputs():
    return [1]
