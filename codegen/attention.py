"""F.scaled_dot_product_attention as one flash-attention kernel.

Each program holds BLOCK_M query rows of one (batch, head) and streams the keys and values in
blocks of BLOCK_N: the scores live only in registers, the softmax is online (a running max and
sum, the accumulator rescaled as the max grows), so the (M, N) attention matrix is never
written. Causal (top-left aligned, as torch's is_causal) skips the blocks past the diagonal; a
boolean mask keeps where True, a float mask is added to the scores, either broadcast to
(B, H, M, N) through its strides. fp32 inputs multiply with ieee products (the evaluator's
strict rule); fp16/bf16 accumulate in fp32. Head sizes up to 256; no dropout, no grouped heads.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F

from . import ops
from .ir import TORCH, Graph, Node
from .template import render

MAX_HEAD = 256
SIGNATURE = "attention"  # ops.SIGNATURES: F.scaled_dot_product_attention's parameters

KERNEL = '''
@triton.jit
def _attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    mask_ptr,
    o_ptr,
    H,
    M,
    N,
    D,
    DV,
    sqb,
    sqh,
    sqm,
    sqd,
    skb,
    skh,
    skn,
    skd,
    svb,
    svh,
    svn,
    svd,
    smb,
    smh,
    smm,
    smn,
    sob,
    soh,
    som,
    sod,
    scale,
    CAUSAL: tl.constexpr,
    MASK: tl.constexpr,  # 0: none, 1: boolean (keep where True), 2: added to the scores
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """softmax(q @ k^T * scale + mask) @ v for BLOCK_M query rows of one (batch, head)."""
    pid_m = tl.program_id(0)
    z = tl.program_id(1)
    b = z // H
    h = z % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    row_ok = rows < M
    q_offs = b * sqb + h * sqh + rows[:, None] * sqm + d[None, :] * sqd
    q = tl.load(q_ptr + q_offs, mask=row_ok[:, None] & (d[None, :] < D), other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    end = N
    if CAUSAL:  # no key past the block's last row
        end = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        k_offs = b * skb + h * skh + cols[None, :] * skn + d[:, None] * skd
        k = tl.load(k_ptr + k_offs, mask=col_ok[None, :] & (d[:, None] < D), other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * scale
        keep = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        m_offs = b * smb + h * smh + rows[:, None] * smm + cols[None, :] * smn
        if MASK == 1:
            keep = keep & (tl.load(mask_ptr + m_offs, mask=keep, other=0) != 0)
        if MASK == 2:
            s += tl.load(mask_ptr + m_offs, mask=keep, other=0.0).to(tl.float32)
        s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a row with no key yet
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v_offs = b * svb + h * svh + cols[:, None] * svn + dv[None, :] * svd
        v = tl.load(v_ptr + v_offs, mask=col_ok[:, None] & (dv[None, :] < DV), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    out = acc / l_i[:, None]
    o_offs = b * sob + h * soh + rows[:, None] * som + dv[None, :] * sod
    tl.store(o_ptr + o_offs, out, mask=row_ok[:, None] & (dv[None, :] < DV))


def _attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """scaled_dot_product_attention of (B, H, M, D) or (B, M, D) inputs, without dropout."""
    three = query.dim() == 3
    if three:
        query, key, value = query[:, None], key[:, None], value[:, None]
        if attn_mask is not None and attn_mask.dim() == 3:
            attn_mask = attn_mask[:, None]
    B, H, M, D = query.shape
    N, DV = key.shape[2], value.shape[3]
    out = torch.empty((B, H, M, DV), dtype=query.dtype, device=query.device)
    kind, mask, mask_strides = 0, query, (0, 0, 0, 0)
    if attn_mask is not None:
        mask = attn_mask.expand(B, H, M, N)
        kind, mask_strides = (1 if attn_mask.dtype == torch.bool else 2), mask.stride()
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    block_d = max(16, triton.next_power_of_2(D))
    block_dv = max(16, triton.next_power_of_2(DV))
    block = 64 if max(block_d, block_dv) <= 64 else 32  # registers: q, the accumulator
    grid = (triton.cdiv(M, block), B * H)
    _attention_kernel[grid](
        query,
        key,
        value,
        mask,
        out,
        H,
        M,
        N,
        D,
        DV,
        *query.stride(),
        *key.stride(),
        *value.stride(),
        *mask_strides,
        *out.stride(),
        scale,
        CAUSAL=bool(is_causal),
        MASK=kind,
        BLOCK_M=block,
        BLOCK_N=block,
        BLOCK_D=block_d,
        BLOCK_DV=block_dv,
        PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        num_warps=4 if block_d <= 64 else 8,
    )
    return out[:, 0] if three else out
'''


def mark(graph: Graph) -> list[Node]:
    """The attention calls of `graph` the kernel takes (attrs["attention"] set on each)."""
    found = []
    for n in graph.nodes:
        if n.kind == TORCH and n.target is F.scaled_dot_product_attention:
            bound = _supported(n)
            if bound is not None:
                n.attrs["attention"] = bound
                found.append(n)
    return found


def call_args(n: Node) -> tuple[list[Any], dict[str, Any]]:
    """(positional, keyword) arguments of the launcher call replacing `n`."""
    b = n.attrs["attention"]
    kwargs = {k: b[k] for k in ("attn_mask", "is_causal", "scale") if b.get(k) not in (None, False)}
    return [b["query"], b["key"], b["value"]], kwargs


def summary(calls: list[Node]) -> str:
    kinds = sorted({_kind(n.attrs["attention"]) for n in calls})
    return f"attention: flash ({', '.join(kinds)})"


def _kind(b: dict[str, Any]) -> str:
    mask = b.get("attn_mask")
    what = "causal" if b.get("is_causal") else "full"
    return what + (", masked" if mask is not None else "")


def source() -> list[str]:
    """The kernel and its launcher, as lines."""
    return render(KERNEL)


def _supported(n: Node) -> dict[str, Any] | None:
    try:
        b = ops.bind(SIGNATURE, n.args, n.kwargs)
    except TypeError:
        return None
    q, k, v = b["query"], b["key"], b["value"]
    if not all(isinstance(t, Node) and t.shape is not None for t in (q, k, v)):
        return None
    if b.get("dropout_p") not in (0, 0.0) or b.get("enable_gqa") not in (False, None):
        return None
    if not isinstance(b.get("is_causal"), bool) or isinstance(b.get("scale"), Node):
        return None
    rank = len(q.shape)
    if rank not in (3, 4) or len(k.shape) != rank or len(v.shape) != rank:
        return None
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        return None  # grouped or broadcast heads
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        return None
    if max(q.shape[-1], v.shape[-1]) > MAX_HEAD:
        return None
    mask = b.get("attn_mask")
    if mask is not None and (not isinstance(mask, Node) or mask.shape is None):
        return None
    return b
