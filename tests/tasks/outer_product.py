"""a[:, None] * b[None, :]: an output 4096x larger than its inputs and fast to write, so a timed
round holds many outputs at once (the judge's demand, not the candidate's memory)."""

# read rows + cols elements, write rows*cols; 1 FLOP per output element
import torch
import torch.nn as nn

rows = 4096
cols = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a[:, None] * b[None, :]


def get_inputs():
    return [torch.randn(rows), torch.randn(cols)]


def get_init_inputs():
    return []
