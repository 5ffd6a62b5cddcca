"""Conv2d (no bias of its own), then a per-channel bias add and ReLU: a conv with an epilogue."""

# read N*Ci*H*W*4 bytes of input, Co*Ci*k*k*4 of weight and Co*4 of bias, write N*Co*H*W*4
# bytes ("same" padding keeps H, W): 0.403 GB per call;
# 2*N*Co*H*W*Ci*k*k FLOP for the conv (bias and ReLU: 2 per output): 77.3 GFLOP.
# H200 floor: 1.29 ms in fp32 (77.3 GFLOP at 60 TFLOP/s; compute bound), 0.10 ms in bf16.
# PyTorch's default cudnn.allow_tf32=True runs eager "fp32" convs on TF32 tensor cores,
# under this floor (eager measured 0.86 ms): a strict-fp32 roofline must pin that flag off.
# Eager writes the conv output, reads it back and writes again: the epilogue alone costs
# 2 extra passes over 268 MB.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3


class Model(nn.Module):
    """relu(conv2d(x) + bias[c]), the conv with padding="same" and stride 1.

    Output shape: (batch_size, out_channels, height, width)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding="same", bias=False)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
