"""A model whose code fx alone cannot trace: a module alias, `.item()` in __init__, asserts and
an `if` on sizes and devices, a default forward argument, a slice bound from an argument."""

import math

import torch as th
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, keep, rate):
        super().__init__()
        self.keep = keep
        self.rates = [x.item() for x in th.linspace(0, rate, 3)]
        self.w = nn.Parameter(th.randn(features, features) / math.sqrt(features))

    def forward(self, x, mask=None):
        assert x.shape[-1] == self.w.shape[0], "x has the wrong width"
        if x.device != self.w.device:
            raise ValueError(f"x is on {x.device}, the weight on {self.w.device}")
        y = th.softmax((x @ self.w) * self.rates[1], dim=-1)
        return y[:, : self.keep] * 2.0


batch_size = 6
features = 32
keep = 20


def get_inputs():
    return [th.randn(batch_size, features)]


def get_init_inputs():
    return [features, keep, 0.5]
