"""A deep narrow MLP: more parameters (72) than one evaluator message carries descriptors for."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, depth):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(features, features), nn.ReLU()]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


batch_size = 4
features = 16


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, 36]
