"""scaled_dot_product_attention with an additive mask broadcast over batch and heads."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


batch_size = 2
num_heads = 3
seq_q = 40
seq_k = 56
head_dim = 32


def get_inputs():
    q = torch.randn(batch_size, num_heads, seq_q, head_dim)
    k = torch.randn(batch_size, num_heads, seq_k, head_dim)
    v = torch.randn(batch_size, num_heads, seq_k, head_dim)
    return [q, k, v, torch.randn(1, 1, seq_q, seq_k)]


def get_init_inputs():
    return []
