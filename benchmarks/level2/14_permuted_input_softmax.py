"""Softmax over the last dimension of a permuted view whose last dimension is not contiguous."""

# read B*S*D*4 bytes, write B*S*D*4 bytes (B, S, D = batch_size, seq_len, dim): 1.07 GB per
# call; ~5 FLOP/element: 0.67 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). The input is stored as
# (batch_size, dim, seq_len) and viewed through .transpose(1, 2): the softmax axis has stride
# seq_len, so coalesced reads run across rows, not along them.
import torch
import torch.nn as nn

batch_size = 32
seq_len = 4096
dim = 1024


class Model(nn.Module):
    """softmax(x, dim=-1) on x of logical shape (batch_size, seq_len, dim), strides (D*S, 1, S).

    Output shape: (batch_size, seq_len, dim)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, seq_len).transpose(1, 2) * 3.0]


def get_init_inputs():
    return []
