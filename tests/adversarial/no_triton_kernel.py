# Exploit: no Triton kernel at all. ModelNew is the reference rewritten in PyTorch, so any
# "speedup" measures PyTorch against itself. Caught statically ("no-triton": no top-level
# @triton.jit function), and at run time by the launch counter ("no-triton-launch").
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.addcmul(torch.ones_like(x), x, torch.full_like(x, 3.0))
