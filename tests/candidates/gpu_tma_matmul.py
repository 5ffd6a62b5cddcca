"""a @ b on Hopper's TMA: host-side tensor descriptors (triton.tools.tensor_descriptor) carry the
tiles; out-of-range rows, columns and the K tail are zero-filled on load and clipped on store."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def matmul_tma_kernel(
    a_desc,
    b_desc,
    c_desc,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])
        b = b_desc.load([k, off_n])
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))  # `a` does not outlive the loop


def _tma_ready(t):
    """`t` itself, or a copy TMA can address: unit last stride, 16-byte aligned base and rows."""
    elem = t.element_size()
    if t.stride(-1) == 1 and (t.stride(0) * elem) % 16 == 0 and t.data_ptr() % 16 == 0:
        return t
    rows, cols = t.shape
    padded = torch.zeros(rows, cols + (-cols % (16 // elem)), dtype=t.dtype, device=t.device)
    padded[:, :cols] = t
    return padded[:, :cols]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = _tma_ready(a), _tma_ready(b)
        M, K = a.shape
        N = b.shape[1]
        elem = a.element_size()
        c_full = torch.empty(M, N + (-N % (16 // elem)), dtype=a.dtype, device=a.device)
        c = c_full[:, :N]
        block_m, block_n = 64, 64
        block_k = 32 if elem == 4 else 64
        a_desc = TensorDescriptor.from_tensor(a, [block_m, block_k])
        b_desc = TensorDescriptor.from_tensor(b, [block_k, block_n])
        c_desc = TensorDescriptor.from_tensor(c, [block_m, block_n])
        grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
        matmul_tma_kernel[grid](
            a_desc,
            b_desc,
            c_desc,
            K,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
            num_warps=4,
            num_stages=3,
        )
        return c if c.is_contiguous() else c.contiguous()
