"""GELU (tanh) over the flat tensor through host-side 1-D tensor descriptors (TMA on Hopper)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

BLOCK = 1024  # tune: 256, 512, 1024


@triton.jit
def gelu_desc_kernel(x_desc, y_desc, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK
    x = x_desc.load([off])  # the tail block past n reads zeros; its store is clipped
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * z)) - 1.0
    y_desc.store([off], 0.5 * x * (1.0 + t))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        flat = x.contiguous().view(-1)
        y = torch.empty_like(flat)
        n = flat.numel()
        x_desc = TensorDescriptor(flat, shape=[n], strides=[1], block_shape=[BLOCK])
        y_desc = TensorDescriptor.from_tensor(y, block_shape=[BLOCK])
        gelu_desc_kernel[(triton.cdiv(n, BLOCK),)](x_desc, y_desc, BLOCK=BLOCK)
        return y.view(x.shape)
