"""A model whose __init__ has lines ruff would wrap: a long signature and nested constructors."""

import torch
import torch.nn as nn


# fmt: off
class Model(nn.Module):
    def __init__(self, in_features, hidden_features, out_features, negative_slope_of_the_activation=0.2):  # noqa: E501
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, hidden_features), nn.LeakyReLU(negative_slope_of_the_activation), nn.Linear(hidden_features, out_features))  # noqa: E501
        self.scale = 0.5

    def forward(self, x):
        return torch.tanh(self.body(x) * self.scale)
# fmt: on


batch_size = 8
in_features = 64
hidden_features = 96
out_features = 48


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features]
