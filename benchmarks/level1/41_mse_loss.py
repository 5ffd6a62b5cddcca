"""Mean squared error between two (batch_size, dim) tensors, reduced to a scalar."""

# read 2*B*N*4 bytes, write one fp32 scalar (B = batch_size, N = dim): 1.07 GB per call;
# 3 FLOP/element (subtract, square, add): 0.40 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound; a full-tensor reduction).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 16384


class Model(nn.Module):
    """F.mse_loss(predictions, targets), reduction="mean".

    Output shape: ()
    """

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(predictions, targets)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim) + 0.5]


def get_init_inputs():
    return []
