"""Logsumexp over the last dimension of a (batch_size, dim) tensor."""

# read B*N*4 bytes, write B*4 bytes (B = batch_size, N = dim): 1.07 GB per call;
# ~3 FLOP/element (max, subtract, exp; a log per row): 0.81 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound; online max-rescaling makes it one pass).
import torch
import torch.nn as nn

batch_size = 8192
dim = 32768


class Model(nn.Module):
    """torch.logsumexp(x, dim=-1).

    Output shape: (batch_size,)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=-1)


def get_inputs():
    # Large logits: exp without the max subtraction overflows fp32.
    return [torch.randn(batch_size, dim) * 40.0]


def get_init_inputs():
    return []
