"""A row summed over the chunk (4) and then broadcast over the heads (4): at these sizes the sum
and the product look like one row group, which holds only where the two sizes are equal (and
every variant of the task moves them alike)."""

import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    def __init__(self, head, chunk):
        super().__init__()
        self.head = head
        self.chunk = chunk
        self.scale = nn.Parameter(torch.randn(head))

    def forward(self, x, initial=None):
        blocks = rearrange(x, "b (c l) ... -> b c l ...", l=self.chunk)
        T = blocks.size(2)
        mask = torch.tril(torch.ones(T, T, device=x.device, dtype=bool), diagonal=0)
        s = torch.cumsum(blocks, dim=2)
        if initial is None:
            initial = torch.zeros_like(s[:, :1])
        s = torch.cat([initial, s], dim=1)[:, 1:]
        w = s.sum(dim=-1)
        scores = (w[..., :, None] - w[..., None, :]).masked_fill(~mask, -torch.inf)
        out = torch.exp(scores).sum(-1, keepdim=True) * s * self.scale
        return rearrange(out, "b c l h -> b (c l) h")


batch_size = 2
seq = 16
head = 4
chunk = 4


def get_inputs():
    return [torch.randn(batch_size, seq, head)]


def get_init_inputs():
    return [head, chunk]
