"""A linear layer with exact GELU: GEMM + bias + activation, as in a transformer MLP."""

# read B*I*4 bytes of x, O*I*4 + O*4 of weight and bias, write B*O*4 bytes
# (B, I, O = batch_size, in_features, out_features): 0.805 GB per call;
# 2*B*I*O FLOP: 1099.5 GFLOP.
# H200 floor: 18.3 ms in fp32 (1.10 TFLOP at 60 TFLOP/s; compute bound, SGEMM-bound without
# TF32), 1.39 ms in bf16 (at 790 TFLOP/s). The epilogue is free once fused.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
in_features = 8192
out_features = 8192


class Model(nn.Module):
    """gelu(x @ W^T + b), exact (erf) GELU.

    Output shape: (batch_size, out_features)
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
