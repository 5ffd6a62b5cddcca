"""Sum over the middle dimension of a (batch_size, dim1, dim2) tensor."""

# read B*D1*D2*4 bytes, write B*D2*4 bytes (B, D1, D2 = batch_size, dim1, dim2): 1.07 GB per
# call; 1 FLOP/element: 0.27 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). The reduced dim has stride D2:
# coalesce along D2 and accumulate over D1.
import torch
import torch.nn as nn

batch_size = 128
dim1 = 2048
dim2 = 1024


class Model(nn.Module):
    """torch.sum(x, dim=1).

    Output shape: (batch_size, dim2)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
