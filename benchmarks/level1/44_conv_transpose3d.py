"""A strided 3-D transposed convolution (a decoder's upsampling step), on its own."""

# read N*Ci*D*H*W*4 bytes of input and Ci*Co*k^3*4 of weight, write N*Co*D'*H'*W'*4 bytes
# (D' = (D-1)*stride - 2*(k//2) + k; 63x127x127 at the defaults): 1.31 GB per call;
# 2*N*Ci*D*H*W*Co*k^3 FLOP: 116.0 GFLOP.
# H200 floor: 1.93 ms in fp32 (116.0 GFLOP at 60 TFLOP/s; compute bound), 0.15 ms in bf16.
# Eager fp32 measured 2.99 ms (cuDNN, TF32 allowed by PyTorch's default), bf16 2.14 ms.
# The fusion codegen leaves convolutions to torch and has nothing to fuse here.
import torch
import torch.nn as nn

batch_size = 8
in_channels = 64
out_channels = 32
depth = 32
height = 64
width = 64
kernel_size = 3
stride = 2


class Model(nn.Module):
    """nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride, padding=kernel_size//2).

    Output shape: (
        batch_size,
        out_channels,
        (depth - 1) * stride - 2 * (kernel_size // 2) + kernel_size,
        (height - 1) * stride - 2 * (kernel_size // 2) + kernel_size,
        (width - 1) * stride - 2 * (kernel_size // 2) + kernel_size,
    )
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
