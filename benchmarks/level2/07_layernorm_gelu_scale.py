"""LayerNorm, tanh-GELU, then a scalar scale: a norm + activation chain."""

# read B*S*H*4 bytes, write B*S*H*4 bytes, read 2*H*4 bytes of weight and bias
# (B, S, H = batch_size, seq_len, hidden_size): 1.07 GB per call;
# ~18 FLOP/element (8 for the norm, 9 for GELU, 1 for the scale): 2.42 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). Eager makes three passes.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
seq_len = 2048
hidden_size = 4096
scaling_factor = 1.7


class Model(nn.Module):
    """gelu_tanh(layer_norm(x)) * scaling_factor.

    Output shape: (batch_size, seq_len, hidden_size)
    """

    def __init__(self, hidden_size: int, scaling_factor: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x), approximate="tanh") * self.scaling_factor


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size) * 3.0 - 1.0]


def get_init_inputs():
    return [hidden_size, scaling_factor]
