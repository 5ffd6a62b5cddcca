"""A task whose reference fails at its own shape: the weight is built one row too tall for the
input, so every forward raises a shape error. A task error, never a candidate's failure."""

import torch
from torch import nn

batch_size = 4
dim = 64


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim + 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.weight)  # (4, 64) @ (65, 64): the inner sizes differ


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
