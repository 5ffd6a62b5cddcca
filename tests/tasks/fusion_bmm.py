import torch
import torch.nn as nn


class Model(nn.Module):
    """bmm with a scaled residual, a matmul against a transposed weight, and addmm."""

    def __init__(self, k, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, k))
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, a, b, c):
        y = torch.bmm(a, b) * 0.5 + c
        z = torch.matmul(y, self.weight.T)
        w = torch.addmm(self.bias, y[0], self.weight.t(), beta=0.5, alpha=2.0)
        return torch.relu(z), w


batch = 2
m = 20
k = 24
n = 18


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, k), torch.randn(batch, m, k)]


def get_init_inputs():
    return [k, n]
