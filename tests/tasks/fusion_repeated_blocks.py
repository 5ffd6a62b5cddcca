"""A model that repeats one block at other widths: its kernels are written once."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden * 2),
            nn.ReLU(),
            nn.Linear(hidden * 2, out_features),
            nn.Sigmoid(),
        )
        self.norm_a = nn.LayerNorm(out_features)
        self.norm_b = nn.LayerNorm(out_features)

    def forward(self, x):
        y = self.blocks(x)
        return self.norm_b(torch.relu(self.norm_a(y)) * 2.0)


batch_size = 8
in_features = 24
hidden = 40
out_features = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
