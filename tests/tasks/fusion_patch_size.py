"""A size forward computes from two attributes, as ViT writes it: `p * p * img.shape[1]`."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, patch, dim):
        super().__init__()
        self.patch = patch
        self.proj = nn.Linear(patch * patch * 3, dim)

    def forward(self, img):
        p = self.patch
        x = img.unfold(2, p, p).unfold(3, p, p).reshape(img.shape[0], -1, p * p * img.shape[1])
        return torch.relu(self.proj(x))


batch_size = 2
image = 16
patch = 4
dim = 8


def get_inputs():
    return [torch.randn(batch_size, 3, image, image)]


def get_init_inputs():
    return [patch, dim]
