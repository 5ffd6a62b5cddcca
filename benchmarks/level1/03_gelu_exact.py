"""GELU, exact (erf) form, on a (batch_size, dim) tensor."""

# read B*N*4 bytes, write B*N*4 bytes (B = batch_size, N = dim):
# 1.07 GB per call; ~5 FLOP/element (erf counted as one): 0.67 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound, half that in bf16/fp16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 32768


class Model(nn.Module):
    """0.5 * x * (1 + erf(x / sqrt(2))) elementwise.

    Output shape: (batch_size, dim)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2.0]


def get_init_inputs():
    return []
