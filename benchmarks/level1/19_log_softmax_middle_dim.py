"""Log-softmax over the class dimension (dim 1) of per-position logits, as a segmentation head."""

# read B*K*L*4 bytes, write B*K*L*4 bytes (B, K, L = batch_size, num_classes, length): 1.07 GB
# per call; ~5 FLOP/element: 0.67 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound; the reduced dim has stride L).
import torch
import torch.nn as nn

batch_size = 64
num_classes = 256
length = 8192


class Model(nn.Module):
    """log_softmax(x, dim=1).

    Output shape: (batch_size, num_classes, length)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, num_classes, length) * 4.0]


def get_init_inputs():
    return []
