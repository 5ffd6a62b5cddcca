"""RMSNorm written out in PyTorch, as in Llama-style transformers."""

# read B*S*H*4 bytes, write B*S*H*4 bytes, read H*4 bytes of weight
# (B, S, H = batch_size, seq_len, hidden_size): 1.07 GB per call;
# ~5 FLOP/element (square, sum, rsqrt per row, two multiplies): 0.67 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound).
import torch
import torch.nn as nn

batch_size = 16
seq_len = 2048
hidden_size = 4096
eps = 1e-6


class Model(nn.Module):
    """x * rsqrt(mean(x^2, dim=-1) + eps) * weight.

    Output shape: (batch_size, seq_len, hidden_size)
    """

    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size, eps]
