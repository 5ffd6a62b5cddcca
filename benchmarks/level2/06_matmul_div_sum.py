"""Matmul by a weight, division by a constant, then a sum over the output features."""

# read B*I*4 bytes of x and I*O*4 of weight, write B*4 bytes (B, I, O = batch_size,
# in_features, out_features): 0.671 GB per call;
# 2*B*I*O FLOP as written: 1099.5 GFLOP.
# H200 floor: 18.3 ms in fp32 as written (1.10 TFLOP at 60 TFLOP/s; compute bound), 1.39 ms
# in bf16. Algebra collapses it: sum_j (x @ W)[:, j] = x @ W.sum(1), a GEMV that is memory
# bound at 0.16 ms; the rounding differs from the reference, within fp32 tolerance.
import torch
import torch.nn as nn

batch_size = 16384
in_features = 8192
out_features = 4096
divisor = 4.0


class Model(nn.Module):
    """torch.sum((x @ W) / divisor, dim=1, keepdim=True), W of shape (in_features, out_features).

    Output shape: (batch_size, 1)
    """

    def __init__(self, in_features: int, out_features: int, divisor: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * in_features**-0.5)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(torch.matmul(x, self.weight) / self.divisor, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
