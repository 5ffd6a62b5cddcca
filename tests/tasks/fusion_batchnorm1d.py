import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, BatchNorm1d, tanh: the batch statistics reduce over the batch dim."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)

    def forward(self, x):
        return torch.tanh(self.bn(self.fc(x)))


batch_size = 20
in_features = 16
out_features = 24


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
