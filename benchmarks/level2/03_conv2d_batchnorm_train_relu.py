"""Conv2d, BatchNorm2d in training mode, ReLU: the classic ResNet stem block while training."""

# read N*Ci*H*W*4 bytes of input and Co*Ci*k*k*4 of weight, write N*Co*H*W*4 bytes, plus
# 4*Co*4 bytes of affine parameters and running stats: 0.403 GB per call;
# 2*N*Co*H*W*Ci*k*k FLOP for the conv (~10 per output for the norm and ReLU): 77.3 GFLOP.
# H200 floor: 1.29 ms in fp32 (77.3 GFLOP at 60 TFLOP/s; compute bound), 0.10 ms in bf16.
# PyTorch's default cudnn.allow_tf32=True runs eager "fp32" convs on TF32 tensor cores,
# under this floor (eager measured 0.97 ms): a strict-fp32 roofline must pin that flag off.
# Batch statistics need the whole conv output before any element is normalized, so the
# epilogue is a split reduction then a normalize pass over the 268 MB conv output.
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
momentum = 0.1


class Model(nn.Module):
    """relu(batch_norm(conv2d(x))), the norm in training mode (it updates its running stats).

    Output shape: (batch_size, out_channels, height, width)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, momentum: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding="same", bias=False)
        self.norm = nn.BatchNorm2d(out_channels, momentum=momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, momentum]
