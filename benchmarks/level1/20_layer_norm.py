"""LayerNorm over the hidden dimension of a (batch_size, seq_len, hidden_size) activation."""

# read B*S*H*4 bytes, write B*S*H*4 bytes, read 2*H*4 bytes of weight and bias
# (B, S, H = batch_size, seq_len, hidden_size): 1.07 GB per call;
# ~8 FLOP/element (mean, centred square, variance, rsqrt per row, scale, shift): 1.07 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound).
import torch
import torch.nn as nn

batch_size = 16
seq_len = 1024
hidden_size = 8192
eps = 1e-5


class Model(nn.Module):
    """nn.LayerNorm(hidden_size) with elementwise affine weight and bias.

    Output shape: (batch_size, seq_len, hidden_size)
    """

    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    # An offset mean makes a one-pass E[x^2] - E[x]^2 variance lose visible precision.
    return [torch.randn(batch_size, seq_len, hidden_size) * 2.0 + 3.0]


def get_init_inputs():
    return [hidden_size, eps]
