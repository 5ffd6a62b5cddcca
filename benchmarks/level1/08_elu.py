"""ELU with a non-default alpha on an NCHW activation map."""

# read B*C*H*W*4 bytes, write B*C*H*W*4 bytes (B, C, H, W = batch_size, channels, height, width):
# 1.07 GB per call; ~4 FLOP/element (exp counted as one): 0.54 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound, half that in bf16/fp16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 256
height = 128
width = 128
alpha = 0.7


class Model(nn.Module):
    """x where x > 0, else alpha * (exp(x) - 1).

    Output shape: (batch_size, channels, height, width)
    """

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 2.0]


def get_init_inputs():
    return [alpha]
