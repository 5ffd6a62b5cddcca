"""BatchNorm2d in eval mode (running statistics), then ReLU: inference's per-channel affine."""

# read B*C*H*W*4 bytes, write B*C*H*W*4 bytes, read 4*C*4 bytes of weight, bias and running
# stats: 1.07 GB per call; ~3 FLOP/element (scale, shift, max): 0.40 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound).
import torch
import torch.nn as nn

batch_size = 64
channels = 128
height = 128
width = 128
eps = 1e-5


class Model(nn.Module):
    """relu(batch_norm(x)) with the norm put in eval mode at construction.

    Output shape: (batch_size, channels, height, width)
    """

    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels, eps=eps)
        # Statistics as if trained; eval mode normalizes with them instead of the batch's.
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.running_var.uniform_(0.5, 2.0)
        self.norm.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(x))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, eps]
