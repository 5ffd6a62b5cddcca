import torch
import torch.nn as nn


class Model(nn.Module):
    """An LSTM written by hand: a reversed loop over the sequence that carries (h, c) and
    appends nothing; the gates split by chunk inside the step, the last state returned."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.x2g = nn.Linear(input_size, 4 * hidden_size)
        self.h2g = nn.Linear(hidden_size, 4 * hidden_size, bias=False)

    def forward(self, x):
        seq_len, batch, _ = x.shape
        h = torch.zeros(batch, self.hidden_size, device=x.device, dtype=x.dtype)
        c = torch.zeros_like(h)
        for t in range(seq_len - 1, -1, -1):
            gates = self.x2g(x[t]) + self.h2g(h)
            i, f, g, o = gates.chunk(4, dim=1)
            i = torch.sigmoid(i)
            f = torch.sigmoid(f)
            g = torch.tanh(g)
            o = torch.sigmoid(o)
            c = f * c + i * g
            h = o * torch.tanh(c)
        return h, c


seq_len = 12
batch = 5
input_size = 24
hidden_size = 16


def get_inputs():
    return [torch.randn(seq_len, batch, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
