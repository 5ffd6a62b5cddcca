import torch
import torch.nn as nn


class Model(nn.Module):
    """Einsums that are products (a 4-D tensor times a matrix, a weight read transposed with the
    operands given as a list, a batched product with the output implicit) and one that is not
    (an outer product): the first three as tl.dot kernels, the last left to torch."""

    def __init__(self, l, k):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, l))

    def forward(self, a, b, c, d):
        x = torch.einsum("bijl,lk->bijk", a, b)
        y = torch.einsum("bij l, k l -> bij k", [a, self.weight])
        z = torch.einsum("bij,bjk", c, d)  # implicit output: bik
        outer = torch.einsum("i,j->ij", a[0, 0, 0], b[0])
        return torch.relu(x) + y, z * 2.0, outer


batch = 2
i = 3
j = 5
l = 12
k = 10


def get_inputs():
    return [
        torch.randn(batch, i, j, l),
        torch.randn(l, k),
        torch.randn(batch, i, l),
        torch.randn(batch, l, k),
    ]


def get_init_inputs():
    return [l, k]
