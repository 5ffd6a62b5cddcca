"""Cross-entropy loss (mean over the batch) of (batch_size, num_classes) logits."""

# read B*K*4 bytes of logits and B*8 bytes of int64 targets, write one fp32 scalar
# (B, K = batch_size, num_classes): 1.07 GB per call;
# ~5 FLOP/element (max, subtract, exp, sum; log and pick per row): 1.34 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). The batch mean is a second,
# tiny cross-row reduction.
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
num_classes = 32768


class Model(nn.Module):
    """F.cross_entropy(logits, targets), reduction="mean".

    Output shape: ()
    """

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    logits = torch.randn(batch_size, num_classes) * 3.0
    targets = torch.randint(0, num_classes, (batch_size,))
    return [logits, targets]


def get_init_inputs():
    return []
