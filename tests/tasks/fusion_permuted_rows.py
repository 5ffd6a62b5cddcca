import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax and log_softmax over the last dim of inputs stored with that dim elsewhere.

    x: logical (batch, seq, dim) stored as (batch, dim, seq); y: logical (batch, h, w, c) stored
    as (batch, c, h, w), a channels-last view of an NCHW tensor; z: logical (rows, cols) stored
    transposed.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        return (
            torch.softmax(x * 2.0 + 1.0, dim=-1),
            torch.log_softmax(y, dim=-1) * 0.5,
            torch.softmax(z, dim=1),
        )


batch_size = 2
seq_len = 24
dim = 20
height = 3
width = 5
channels = 12
rows = 9
cols = 33


def get_inputs():
    return [
        torch.randn(batch_size, dim, seq_len).transpose(1, 2),
        torch.randn(batch_size, channels, height, width).permute(0, 2, 3, 1),
        torch.randn(cols, rows).t(),
    ]


def get_init_inputs():
    return []
