"""An LSTM whose nested (h, c) state feeds the fused part: `out, (h, c) = self.lstm(x)`."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=2, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return torch.tanh(h[-1]) * 2.0 + c[-1] + out[:, -1, :]


batch_size = 3
sequence_length = 5
input_size = 8
hidden_size = 12


def get_inputs():
    return [torch.randn(batch_size, sequence_length, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
