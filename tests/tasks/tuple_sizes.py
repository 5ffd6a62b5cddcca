"""Row sums of a batch of matrices whose (rows, cols) are one tuple constant."""

# read batch*rows*cols elements, write batch*rows; 1 FLOP per element read
import torch
import torch.nn as nn

batch_size = 4
input_shape = (12, 40)  # (rows, cols)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
