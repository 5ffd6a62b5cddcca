"""A model whose __init__ has a line no wrapping rule splits (a long string), and comments."""

import torch
import torch.nn as nn


# fmt: off
class Model(nn.Module):
    def __init__(self, features, scale):
        super(Model, self).__init__()  # noqa: UP008 (the author writes it so; copied with the line)
        self.note = "a string literal this long is written as its author wrote it, on one line of its own, even inside parentheses"  # noqa: E501
        self.scale = scale
        self.lin = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.lin(x) * self.scale)
# fmt: on


batch_size = 4
features = 24


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, 0.5]
