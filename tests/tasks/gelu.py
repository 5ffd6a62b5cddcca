"""GELU, tanh approximation, on a 2-D tensor, sized for the CPU interpreter."""

# read and write batch_size*dim elements; ~10 FLOPs per element
import torch
import torch.nn as nn

batch_size = 16
dim = 2500


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(batch_size, dim) * 3.0]


def get_init_inputs():
    return []
