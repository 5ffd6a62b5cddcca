"""Batched matrix multiply: (batch_size, m, k) @ (batch_size, k, n)."""

# read B*(m*k + k*n)*4 bytes, write B*m*n*4 bytes (B = batch_size): 1.34 GB per call;
# 2*B*m*n*k FLOP: 274.9 GFLOP.
# H200 floor: 4.58 ms in fp32 (274.9 GFLOP at 60 TFLOP/s; compute bound), 0.35 ms in bf16
# (at 790 TFLOP/s; close to the 0.16 ms memory floor of the halved bytes).
import torch
import torch.nn as nn

batch_size = 64
m = 1024
k = 2048
n = 1024


class Model(nn.Module):
    """torch.bmm(a, b).

    Output shape: (batch_size, m, n)
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []
