"""A linear layer, x @ W^T + b, with a wide output."""

# read B*I*4 bytes of x, O*I*4 + O*4 bytes of weight and bias, write B*O*4 bytes
# (B, I, O = batch_size, in_features, out_features): 0.940 GB per call;
# 2*B*I*O FLOP: 1099.5 GFLOP.
# H200 floor: 18.3 ms in fp32 (1.10 TFLOP at 60 TFLOP/s; compute bound, SGEMM-bound without
# TF32), 1.39 ms in bf16 (at 790 TFLOP/s).
import torch
import torch.nn as nn

batch_size = 16384
in_features = 4096
out_features = 8192


class Model(nn.Module):
    """nn.Linear(in_features, out_features) with bias.

    Output shape: (batch_size, out_features)
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
