"""LayerNorm over the last dimension with affine weight and bias, sized for the CPU interpreter."""

# read and write batch_size*seq_len*hidden elements (+2*hidden parameters); ~8 FLOPs per element
import torch
import torch.nn as nn

batch_size = 4
seq_len = 12
hidden = 320


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    # Mean 20, std 2: a one-pass E[x^2] - E[x]^2 variance cancels 400 - 396 and loses ~7 bits,
    # which the float64 precision check sees (the honest two-pass kernel does not).
    return [torch.randn(batch_size, seq_len, hidden) * 2.0 + 20.0]


def get_init_inputs():
    return [hidden]
