"""BatchNorm2d in training mode: batch statistics, and the running-stat update it performs."""

# read B*C*H*W*4 bytes, write B*C*H*W*4 bytes, read 2*C*4 bytes of affine parameters, read and
# write 2*C*4 bytes of running mean/var: 1.07 GB per call; ~8 FLOP/element: 1.07 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). Each channel's statistics span
# batch_size * height * width = 1M elements across the whole tensor, so a fused kernel needs
# a cross-program reduction (two passes, or a split reduction then a normalize pass).
import torch
import torch.nn as nn

batch_size = 64
channels = 128
height = 128
width = 128
eps = 1e-5
momentum = 0.1


class Model(nn.Module):
    """nn.BatchNorm2d(channels) left in training mode (running stats update on each call).

    Output shape: (batch_size, channels, height, width)
    """

    def __init__(self, channels: int, eps: float, momentum: float):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels, eps=eps, momentum=momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 1.5 + 0.5]


def get_init_inputs():
    return [channels, eps, momentum]
