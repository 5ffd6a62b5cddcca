"""Conv2d, 2-D max pooling, a per-channel scale and Hardswish: conv + pooling + pointwise."""

# read N*Ci*H*W*4 bytes of input, Co*Ci*k*k*4 + 2*Co*4 of weight, bias and scale, write
# N*Co*(H/p)*(W/p)*4 bytes (p = pool_size): 0.202 GB per call;
# 2*N*Co*H*W*Ci*k*k FLOP for the conv: 77.3 GFLOP.
# H200 floor: 1.29 ms in fp32 (77.3 GFLOP at 60 TFLOP/s; compute bound), 0.10 ms in bf16.
# PyTorch's default cudnn.allow_tf32=True runs eager "fp32" convs on TF32 tensor cores,
# under this floor (eager measured 1.02 ms): a strict-fp32 roofline must pin that flag off.
# The pooled map is a quarter of the conv output (268 MB): pooling in the conv's epilogue
# saves writing and re-reading it.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
pool_size = 2


class Model(nn.Module):
    """hardswish(maxpool(conv2d(x)) * scale[c]); conv with padding="same", pool window = stride.

    Output shape: (batch_size, out_channels, height // pool_size, width // pool_size)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding="same")
        self.pool = nn.MaxPool2d(pool_size)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(self.pool(self.conv(x)) * self.scale)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_size]
