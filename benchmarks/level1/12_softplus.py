"""Softplus with non-default beta and threshold on a (batch_size, dim) tensor."""

# read B*N*4 bytes, write B*N*4 bytes (B = batch_size, N = dim):
# 1.07 GB per call; ~6 FLOP/element (exp and log1p counted as one each): 0.81 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound, half that in bf16/fp16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 32768
beta = 2.0
threshold = 15.0


class Model(nn.Module):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold.

    Output shape: (batch_size, dim)
    """

    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


def get_inputs():
    return [torch.randn(batch_size, dim) * 8.0]


def get_init_inputs():
    return [beta, threshold]
