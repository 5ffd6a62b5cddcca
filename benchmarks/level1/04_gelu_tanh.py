"""GELU, tanh approximation, on a (batch_size, seq_len, hidden_size) activation."""

# read B*S*H*4 bytes, write B*S*H*4 bytes (B, S, H = batch_size, seq_len, hidden_size):
# 1.07 GB per call; ~9 FLOP/element (tanh counted as one): 1.21 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound, half that in bf16/fp16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
seq_len = 4096
hidden_size = 1024


class Model(nn.Module):
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) elementwise.

    Output shape: (batch_size, seq_len, hidden_size)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size) * 2.0]


def get_init_inputs():
    return []
