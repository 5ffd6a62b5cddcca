import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalisation over the feature dim (dim 1), written out in PyTorch."""

    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return x / rms


batch_size = 2
features = 12
dim1 = 5
dim2 = 7


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
