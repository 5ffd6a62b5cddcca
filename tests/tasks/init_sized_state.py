import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench's VanillaRNN at small sizes: its constructor sizes a plain tensor by the
    module-level batch_size, which forward overwrites from its second input."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x, initial_hidden=None):
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = torch.tanh(self.i2h(combined))
        return self.h2o(self.hidden)


batch_size = 8
input_size = 32
hidden_size = 24
output_size = 16


def get_inputs():
    return [torch.rand(batch_size, input_size), torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
