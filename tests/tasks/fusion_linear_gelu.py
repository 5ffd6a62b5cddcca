import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, then GELU and a scaled residual: the epilogue runs on the matmul's accumulator."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x, residual):
        y = self.fc(x)
        y = torch.nn.functional.gelu(y)
        return y * self.scale + residual


batch_size = 24
in_features = 40
out_features = 36


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)]


def get_init_inputs():
    return [in_features, out_features, 1.5]
