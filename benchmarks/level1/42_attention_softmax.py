"""Scaled dot-product attention written out in PyTorch: QK^T, scale, softmax, times V."""

# read 3*B*H*S*D*4 bytes of q, k, v, write B*H*S*D*4 bytes (B, H, S, D = batch_size,
# num_heads, seq_len, head_dim): 0.268 GB per call;
# 4*B*H*S^2*D FLOP for the two matmuls + ~5*B*H*S^2 for the softmax: 140.1 GFLOP.
# H200 floor: 2.34 ms in fp32 (140.1 GFLOP at 60 TFLOP/s; compute bound), 0.18 ms in bf16
# (at 790 TFLOP/s). Eager materializes the (B, H, S, S) scores: 2.1 GB written and read
# twice more; a flash-style kernel never writes them.
import math

import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 2048
head_dim = 64


class Model(nn.Module):
    """softmax(q @ k^T / sqrt(head_dim)) @ v, no mask.

    Output shape: (batch_size, num_heads, seq_len, head_dim)
    """

    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [head_dim]
