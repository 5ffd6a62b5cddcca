import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Cross entropy of (batch, classes) logits: mean, sum and per-row, with targets at
    ignore_index (the default -100, and a class index), as a function and as a module."""

    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss(ignore_index=1, reduction="sum")

    def forward(self, logits, targets, ignored):
        mean = F.cross_entropy(logits, targets)
        per_row = F.cross_entropy(logits * 0.5, ignored, reduction="none")
        mean_ignoring = F.cross_entropy(logits, ignored)
        return mean, per_row, mean_ignoring, self.ce(logits, targets)


batch_size = 7
num_classes = 45


def get_inputs():
    logits = torch.randn(batch_size, num_classes) * 3.0
    targets = torch.randint(0, num_classes, (batch_size,))
    ignored = torch.where(torch.rand(batch_size) < 0.3, -100, targets)
    return [logits, targets, ignored]


def get_init_inputs():
    return []
