"""Square fp32 matrix multiply, C = A @ B, with both operands (n, n)."""

# read 2*n*n*4 bytes, write n*n*4 bytes (n = 8192): 0.805 GB per call;
# 2*n^3 FLOP: 1099.5 GFLOP.
# H200 floor: 18.3 ms in fp32 (1.10 TFLOP at 60 TFLOP/s; compute bound), 1.39 ms in bf16
# (at 790 TFLOP/s). With TF32 off, an fp32 GEMM is bound by cuBLAS SGEMM on the CUDA cores;
# tensor cores only help through a TF32x3-style split that keeps fp32 accuracy.
import torch
import torch.nn as nn

n = 8192


class Model(nn.Module):
    """torch.matmul(a, b).

    Output shape: (n, n)
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
