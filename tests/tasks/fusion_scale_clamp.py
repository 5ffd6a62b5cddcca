"""Constructor arguments that are not sizes: a scale, a derived reciprocal, clamps, an axis."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, scaling_factor, clamp_min, clamp_max, dim):
        super().__init__()
        self.features = features
        self.scaling_factor = scaling_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.dim = dim
        self.inv = 1.0 / scaling_factor

    def forward(self, x):
        x = x * self.scaling_factor + self.inv
        x = torch.clamp(x, self.clamp_min, self.clamp_max)
        return torch.sum(x, dim=self.dim)


batch_size = 24
features = 200
scaling_factor = 2.0
clamp_min = -1.0
clamp_max = 1.5
dim = 1


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, scaling_factor, clamp_min, clamp_max, dim]
