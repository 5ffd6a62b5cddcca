"""Causal attention through F.scaled_dot_product_attention, with head_dim 128."""

# read 3*B*H*S*D*4 bytes of q, k, v, write B*H*S*D*4 bytes (B, H, S, D = batch_size,
# num_heads, seq_len, head_dim): 0.537 GB per call;
# causal: 2*B*H*S^2*D FLOP (half of the full 4*B*H*S^2*D): 274.9 GFLOP.
# H200 floor: 4.58 ms in fp32 (274.9 GFLOP at 60 TFLOP/s; compute bound), 0.35 ms in bf16
# (at 790 TFLOP/s). In fp32 torch picks the memory-efficient kernel (flash needs fp16/bf16).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
num_heads = 16
seq_len = 4096
head_dim = 128


class Model(nn.Module):
    """F.scaled_dot_product_attention(q, k, v, is_causal=True), default 1/sqrt(head_dim) scale.

    Output shape: (batch_size, num_heads, seq_len, head_dim)
    """

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
