"""Sum over one dimension (keepdim): the tensor seen as (outer, reduced, inner), fp32 tiles."""

# Read outer*reduced*inner elements, write outer*inner; one add per element read. Memory bound:
# the read is the whole cost (1 GiB of fp32 is >= 0.22 ms at the H200's 4.8 TB/s). When the
# output is too small to give every SM work, the reduced dimension is split: the splits write
# n_split*outer*inner fp32 partial sums, and the same kernel sums those in a second launch.
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Elements per (inner x reduced) tile and loop step: 4096 fp32 over 4 warps = 32 per thread in
# flight, enough to hide HBM latency; the tile is reduced to one row of sums after the loop.
TILE_SIZE = 4096  # tune: 1024, 2048, 4096, 8192
# The inner (contiguous) extent of a tile: 16 fp32 = 64-byte runs, two whole 32-byte sectors;
# narrow tiles make more programs (fp32 (64, 4096, 256) over dim 1 on an H200: 0.076 ms at 16,
# 0.117 ms at 64, against eager's 0.081 ms).
MAX_BLOCK_INNER = 16  # tune: 16, 32, 64, 128
NUM_WARPS = 4  # tune: 2, 4, 8
# Programs wanted before the reduced dimension is split: 8 per SM on a 132-SM H200 keeps every
# SM streaming while others finish their tails.
MIN_PROGRAMS = 1024  # tune: 256, 512, 1024, 2048
# A split sums at least this many tiles: fewer would not pay for writing and re-reading its
# fp32 partial sums.
MIN_TILES_PER_SPLIT = 4


@triton.jit
def _sum_dim_kernel(
    x_ptr,
    y_ptr,
    reduced_size,
    inner_size,
    rows_per_split,
    y_split_stride,
    BLOCK_R: tl.constexpr,
    BLOCK_INNER: tl.constexpr,
):
    # Grid axis 0 walks (outer, inner block) pairs, 1-D because outer or inner alone may exceed
    # the 65535 limit of axes 1 and 2; axis 1 walks the splits of the reduced dimension.
    pid = tl.program_id(0)
    split = tl.program_id(1)
    n_inner_blocks = tl.cdiv(inner_size, BLOCK_INNER)
    outer = (pid // n_inner_blocks).to(tl.int64)  # int64: the slab offset can pass 2**31
    offs_i = (pid % n_inner_blocks) * BLOCK_INNER + tl.arange(0, BLOCK_INNER)
    offs_r = tl.arange(0, BLOCK_R).to(tl.int64)
    mask_i = offs_i < inner_size
    slab = x_ptr + outer * reduced_size * inner_size
    first_row = split.to(tl.int64) * rows_per_split  # rows_per_split is a multiple of BLOCK_R

    # Tiles are (inner, reduced): the reduced axis last. fp32 partial sums per tile lane, reduced
    # once at the end: fp16/bf16 inputs never accumulate in 16 bits, and the final tree sum keeps
    # the fp32 error of long reductions small (a chain of rows/BLOCK_R adds, then log2(BLOCK_R)).
    acc = tl.zeros((BLOCK_INNER, BLOCK_R), dtype=tl.float32)
    for start in range(0, rows_per_split, BLOCK_R):
        r = first_row + start + offs_r
        ptrs = slab + offs_i[:, None] + r[None, :] * inner_size
        mask = mask_i[:, None] & (r[None, :] < reduced_size)
        acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=1)
    y = y_ptr + split * y_split_stride + outer * inner_size + offs_i
    tl.store(y, total.to(y_ptr.dtype.element_ty), mask=mask_i)


def tile_shape(reduced: int, inner: int) -> tuple[int, int]:
    """(BLOCK_R, BLOCK_INNER): up to TILE_SIZE elements, as wide along inner as it allows."""
    block_inner = min(triton.next_power_of_2(inner), MAX_BLOCK_INNER)
    block_r = max(1, min(triton.next_power_of_2(reduced), TILE_SIZE // block_inner))
    return block_r, block_inner


def rows_per_split(outer: int, reduced: int, inner: int) -> int:
    """Rows each split sums (a multiple of BLOCK_R); `reduced` or more means no split."""
    block_r, block_inner = tile_shape(reduced, inner)
    programs = outer * triton.cdiv(inner, block_inner)
    wanted = triton.cdiv(MIN_PROGRAMS, programs)
    n_split = max(1, min(wanted, reduced // (MIN_TILES_PER_SPLIT * block_r)))
    return triton.cdiv(triton.cdiv(reduced, n_split), block_r) * block_r


def sum_rows(x, y, outer: int, reduced: int, inner: int, rows: int) -> None:
    """Launch the kernel: y[s, o, i] = sum of x[o, r, i] over rows r in [s*rows, (s+1)*rows).

    `rows` >= `reduced` is one split; fewer must be a multiple of BLOCK_R, or splits overlap.
    """
    block_r, block_inner = tile_shape(reduced, inner)
    grid = (outer * triton.cdiv(inner, block_inner), triton.cdiv(reduced, rows))
    _sum_dim_kernel[grid](
        x,
        y,
        reduced,
        inner,
        rows,
        outer * inner,
        BLOCK_R=block_r,
        BLOCK_INNER=block_inner,
        num_warps=NUM_WARPS,
    )


def sum_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    """torch.sum(x, dim, keepdim=True) for floating x of any shape and strides, in x's dtype."""
    dim = dim % x.ndim
    x = x.contiguous()  # the (outer, reduced, inner) view needs dense memory; no-op if it is
    outer = 1
    for size in x.shape[:dim]:
        outer *= size
    reduced = x.shape[dim]
    inner = x.numel() // max(outer * reduced, 1)
    out_shape = (*x.shape[:dim], 1, *x.shape[dim + 1 :])
    y = torch.empty(out_shape, dtype=x.dtype, device=x.device)  # fresh output on every call
    if y.numel() == 0:
        return y
    if reduced == 0:
        return y.zero_()  # an empty sum is 0, as in torch
    rows = rows_per_split(outer, reduced, inner)
    n_split = triton.cdiv(reduced, rows)
    if n_split == 1:
        sum_rows(x, y, outer, reduced, inner, rows)
        return y
    # Two launches, no atomics: atomic fp32 adds land in any order, so results would vary from
    # run to run. The partials are (n_split, outer * inner): a sum over dimension 0 of its own.
    partials = torch.empty((n_split, outer * inner), dtype=torch.float32, device=x.device)
    sum_rows(x, partials, outer, reduced, inner, rows)
    sum_rows(partials, y, 1, n_split, outer * inner, n_split)  # one split: all n_split rows
    return y


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_dim(x, self.dim)
