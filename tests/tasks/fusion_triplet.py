import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Triplet margin losses (the module, mean; the function with swap, p=1 and 'sum'; per row)
    and pairwise distances (the module, keepdim; the function on 3-D inputs)."""

    def __init__(self, margin):
        super().__init__()
        self.triplet = nn.TripletMarginLoss(margin=margin)
        self.distance = nn.PairwiseDistance(keepdim=True)

    def forward(self, anchor, positive, negative, cube_a, cube_b):
        mean = self.triplet(anchor, positive, negative)
        swapped = F.triplet_margin_loss(
            anchor, positive, negative, margin=0.3, p=1, swap=True, reduction="sum"
        )
        per_row = F.triplet_margin_loss(anchor, negative, positive, reduction="none")
        near = self.distance(anchor, positive) * 2.0
        cube = F.pairwise_distance(cube_a, cube_b, eps=0.5)
        return mean, swapped, per_row, near, cube


batch_size = 6
dim = 37


def get_inputs():
    return [
        torch.randn(batch_size, dim),
        torch.randn(batch_size, dim),
        torch.randn(batch_size, dim) * 0.5,
        torch.randn(2, batch_size, dim),
        torch.randn(2, batch_size, dim),
    ]


def get_init_inputs():
    return [1.0]
