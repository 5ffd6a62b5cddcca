import torch
import torch.nn as nn


class Model(nn.Module):
    """Recurrent modules (codegen/recurrent.py): an LSTM batch-first over 2 layers from a given
    state, a bidirectional GRU without biases from zeros, a relu RNN on its output, time-major."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=2, batch_first=True)
        self.gru = nn.GRU(hidden_size, hidden_size, bidirectional=True, bias=False)
        self.rnn = nn.RNN(2 * hidden_size, hidden_size, nonlinearity="relu")

    def forward(self, x, h0, c0):
        out, (hn, cn) = self.lstm(x, (h0, c0))
        seq, state = self.gru(out.transpose(0, 1))
        last, h_rnn = self.rnn(seq)
        return out, hn, cn, state, last[-1] + h_rnn[0]


batch_size = 3
seq_len = 5
input_size = 20
hidden_size = 24


def get_inputs():
    return [
        torch.randn(batch_size, seq_len, input_size),
        torch.randn(2, batch_size, hidden_size),
        torch.randn(2, batch_size, hidden_size),
    ]


def get_init_inputs():
    return [input_size, hidden_size]
