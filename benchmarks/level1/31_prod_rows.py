"""Product over the last dimension of a (batch_size, dim) tensor of factors near one."""

# read B*N*4 bytes, write B*4 bytes (B = batch_size, N = dim): 1.07 GB per call;
# 1 FLOP/element: 0.27 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound).
import torch
import torch.nn as nn

batch_size = 65536
dim = 4096


class Model(nn.Module):
    """torch.prod(x, dim=-1).

    Output shape: (batch_size,)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.prod(x, dim=-1)


def get_inputs():
    # Factors 1 + 0.01*z keep log(prod) ~ N(-dim/2e4, dim/1e4): products stay far from
    # overflow and underflow, in fp16 too, at any dim up to ~1e5.
    return [1.0 + 0.01 * torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
