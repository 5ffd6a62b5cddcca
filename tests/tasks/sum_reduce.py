"""Sum over dimension 1 of a 3-D tensor (keepdim), sized for the CPU interpreter."""

# read batch_size*dim1*dim2 elements, write batch_size*dim2; one add per element read
import torch
import torch.nn as nn

batch_size = 8
dim1 = 200
dim2 = 24


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    # The reduced dimension is a literal, not a module constant: it is not a size, and a shape
    # variant that moved it past the last dimension would break the reference.
    return [1]
