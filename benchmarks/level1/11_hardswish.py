"""Hardswish on a (batch_size, seq_len, hidden_size) activation."""

# read B*S*H*4 bytes, write B*S*H*4 bytes (B, S, H = batch_size, seq_len, hidden_size):
# 1.07 GB per call; ~5 FLOP/element (add, two clamps, two multiplies): 0.67 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound, half that in bf16/fp16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
seq_len = 4096
hidden_size = 1024


class Model(nn.Module):
    """x * relu6(x + 3) / 6 elementwise.

    Output shape: (batch_size, seq_len, hidden_size)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(x)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size) * 4.0]


def get_init_inputs():
    return []
