"""y = 3x + 1 on a (rows, cols) tensor: the exploit zoo's smallest task, for the interpreter."""

# read rows*cols elements, write rows*cols; 2 FLOPs per element
import torch
import torch.nn as nn

rows = 16
cols = 96


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 3.0 + 1.0


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
