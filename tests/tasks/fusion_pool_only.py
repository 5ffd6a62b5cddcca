import torch
import torch.nn as nn


class Model(nn.Module):
    """Only a max pooling: there is nothing for the codegen to fuse."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(1, 3, 8, 8)]


def get_init_inputs():
    return []
