"""Linear layer (x @ W^T + b) followed by exact (erf) GELU, sized for the CPU interpreter."""

# read batch_size*in_features + out_features*(in_features+1) elements,
# write batch_size*out_features; 2*batch_size*in_features*out_features FLOPs for the matmul
# (bias and GELU are negligible)
import torch
import torch.nn as nn

batch_size = 64
in_features = 96
out_features = 80


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
