"""Hardtanh with asymmetric bounds on a (batch_size, dim) tensor."""

# read B*N*4 bytes, write B*N*4 bytes (B = batch_size, N = dim):
# 1.07 GB per call; ~2 FLOP/element (two compares): 0.27 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound, half that in bf16/fp16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 32768
min_val = -0.5
max_val = 1.5


class Model(nn.Module):
    """clamp(x, min_val, max_val) elementwise.

    Output shape: (batch_size, dim)
    """

    def __init__(self, min_val: float, max_val: float):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2.0]


def get_init_inputs():
    return [min_val, max_val]
