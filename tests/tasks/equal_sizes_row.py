"""A row summed over the chunk (4) and then broadcast over the heads (4): at these sizes the sum
and the product look like one row group, which holds only where the two sizes are equal (and
every variant of the task moves them alike)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, head, chunk):
        super().__init__()
        self.head = head
        self.chunk = chunk

    def forward(self, x):
        s = x.reshape(x.size(0), x.size(1) // self.chunk, self.chunk, x.size(2))
        w = s.sum(dim=-1)
        out = torch.exp(w[..., :, None] - w[..., None, :]).sum(-1, keepdim=True) * s
        return out.reshape(x.shape)


batch_size = 2
seq = 16
head = 4
chunk = 4


def get_inputs():
    return [torch.randn(batch_size, seq, head)]


def get_init_inputs():
    return [head, chunk]
