"""Segment sums: rows of x added into num_segments output rows by an index (scatter-add)."""

# read R*D*4 bytes of x and R*8 of int64 index, write S*D*4 bytes (R, D, S = num_rows, dim,
# num_segments): 1.15 GB per call; 1 FLOP/element of x: 0.27 GFLOP.
# H200 floor: 0.27 ms (1.15 GB at 4.25 TB/s; memory bound). Not expected of the fusion
# codegen. About num_rows / num_segments = 16 rows land on each output row, so a kernel
# either sorts by index or uses atomics; fp32 atomics make the sum order, and so its last
# bits, vary from run to run (the reference on CUDA does the same).
import torch
import torch.nn as nn

num_rows = 1048576
dim = 256
num_segments = 65536


class Model(nn.Module):
    """zeros(num_segments, dim).index_add_(0, index, x).

    Output shape: (num_segments, dim)
    """

    def __init__(self, num_segments: int):
        super().__init__()
        self.num_segments = num_segments

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(self.num_segments, x.shape[1], dtype=x.dtype, device=x.device)
        return out.index_add_(0, index, x)


def get_inputs():
    return [torch.randn(num_rows, dim), torch.randint(0, num_segments, (num_rows,))]


def get_init_inputs():
    return [num_segments]
