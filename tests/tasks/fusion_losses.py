import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Elementwise losses and their reductions, as functions and as modules, one with a target
    that broadcasts over the rows."""

    def __init__(self):
        super().__init__()
        self.smooth = nn.SmoothL1Loss(reduction="sum", beta=0.5)
        self.huber = nn.HuberLoss(delta=0.7)

    def forward(self, pred, target, row_target):
        mse = F.mse_loss(pred, target)
        l1 = F.l1_loss(pred, target, reduction="sum")
        elementwise = F.smooth_l1_loss(pred, target, reduction="none", beta=0.3) * 2.0
        broadcast = F.mse_loss(pred, row_target.expand_as(pred))
        return mse, l1, elementwise, self.smooth(pred, target), self.huber(pred, target), broadcast


batch_size = 6
dim = 37


def get_inputs():
    return [
        torch.randn(batch_size, dim),
        torch.randn(batch_size, dim),
        torch.randn(dim),
    ]


def get_init_inputs():
    return []
