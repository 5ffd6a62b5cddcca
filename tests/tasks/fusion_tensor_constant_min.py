"""A minimum and a maximum with 0-dim tensors made in forward from numbers the model holds
(KernelBench's Conv2d_Min_Add_Multiply writes `torch.min(x, torch.tensor(self.constant_value))`):
fx keeps each as a `_tensor_constant` of the graph module, which ModelNew would not have."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, high, low):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.high = high
        self.low = low

    def forward(self, x):
        x = self.linear(x)
        x = torch.min(x, torch.tensor(self.high))
        return torch.max(x, torch.tensor(self.low)) * 2.0


batch_size = 8
features = 32


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, 0.5, -0.1]
