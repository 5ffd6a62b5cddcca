"""LayerNorm over the last dimension: one program per row, looping over column blocks."""

# Per row of n columns: read n (3 passes; the 2nd and 3rd hit L2 for rows up to ~100 KiB), read
# 2n parameters (L2-resident, shared by all rows), write n. ~8 FLOPs per element. Memory bound:
# HBM traffic is one read and one write of x, 8 bytes per fp32 element.
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Column block per loop step: 4096 fp32 over 8 warps = 16 values per thread, no spills; a row
# shorter than this is one iteration of each loop.
MAX_BLOCK_SIZE = 4096  # tune: 1024, 2048, 4096, 8192


@triton.jit
def _layer_norm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    x_row_stride,
    y_row_stride,
    n_cols,
    eps,
    BLOCK_SIZE: tl.constexpr,
):
    # int64 row offsets: rows * stride can pass 2**31 elements on large inputs.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Pass 1: the mean. Per-lane fp32 partial sums, combined once at the end (a tree, not a chain).
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        idx = start + cols
        acc += tl.load(x_row + idx, mask=idx < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols

    # Pass 2: the variance about the mean. Two passes, not E[x^2] - E[x]^2, which loses all its
    # digits when |mean| >> std (fp32 has 24 bits).
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        idx = start + cols
        mask = idx < n_cols
        x = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32)
        diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    # Pass 3: normalise, scale, shift, write in the output's dtype.
    for start in range(0, n_cols, BLOCK_SIZE):
        idx = start + cols
        mask = idx < n_cols
        x = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + idx, y.to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    """LayerNorm of `x` over its trailing weight.numel() elements, with affine weight and bias."""
    n_cols = weight.numel()
    x2 = x.reshape(-1, n_cols)  # a view whenever the leading dimensions can be merged
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()  # columns must be adjacent for coalesced loads
    weight = weight.contiguous()
    bias = bias.contiguous()
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)  # fresh output, dense rows
    if y.numel() == 0:
        return y.view(x.shape)
    block_size = min(triton.next_power_of_2(n_cols), MAX_BLOCK_SIZE)
    # ~512 columns per warp (16 fp32 per thread): wider blocks get more warps, up to 8.
    num_warps = max(1, min(8, block_size // 512))
    _layer_norm_kernel[(x2.shape[0],)](
        x2,
        weight,
        bias,
        y,
        x2.stride(0),
        y.stride(0),
        n_cols,
        eps,
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )
    return y.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.norm.weight, self.norm.bias, self.norm.eps)
