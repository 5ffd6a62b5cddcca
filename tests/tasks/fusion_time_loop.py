import torch
import torch.nn as nn


class Model(nn.Module):
    """A recurrence written as a Python loop over the sequence (batch first): the step reads
    x[:, t], carries two states and appends one output per step; the code around the loop
    makes the states and stacks the outputs."""

    def __init__(self, features: int, hidden: int, out_features: int):
        super().__init__()
        self.cell = nn.Linear(features + hidden, hidden)
        self.head = nn.Linear(hidden, out_features)
        self.scale = 0.5

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        batch, steps, _ = x.shape  # noqa: RUF059 (unused, as tasks write it: the candidate writes _)
        h = h0
        total = torch.zeros_like(h0)
        outs = []
        for t in range(steps):
            h = torch.tanh(self.cell(torch.cat([x[:, t], h], dim=1)))
            total = total + h * self.scale
            outs.append(torch.relu(self.head(h)) + x[:, t, :1])
        return torch.stack(outs, dim=1) + total.sum(dim=1)[:, None, None]


batch = 4
steps = 6
features = 12
hidden = 16
out_features = 8


def get_inputs():
    return [torch.randn(batch, steps, features), torch.randn(batch, hidden)]


def get_init_inputs():
    return [features, hidden, out_features]
