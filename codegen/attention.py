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

import math
import operator
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from . import ops
from .ir import TORCH, Graph, Node
from .template import render
from .trace import TensorInfo

MAX_HEAD = 256
SIGNATURE = "attention"  # ops.SIGNATURES: F.scaled_dot_product_attention's parameters
TITLE = "attention"  # the helper's name less its underscore: no group's launcher may take it
HELPERS: tuple[str, ...] = ()  # ops.HELPERS the kernel calls

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
    MASK: tl.constexpr,  # 0: none, 1: keep where True, 2: added to the scores, 3: drop where True
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
        if MASK == 3:  # masked_fill(mask, -inf) written out: drop where True
            keep = keep & (tl.load(mask_ptr + m_offs, mask=keep, other=1) == 0)
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


def _attention(query, key, value, attn_mask=None, is_causal=False, scale=None, drop_mask=None):
    """scaled_dot_product_attention of (B, H, M, D) or (B, M, D) inputs, without dropout;
    drop_mask: the scores set to -inf where it is True (attention written out by hand)."""
    kind = 0
    if drop_mask is not None:
        attn_mask, kind = drop_mask, 3
    three = query.dim() == 3
    if three:
        query, key, value = query[:, None], key[:, None], value[:, None]
        if attn_mask is not None and attn_mask.dim() == 3:
            attn_mask = attn_mask[:, None]
    B, H, M, D = query.shape
    N, DV = key.shape[2], value.shape[3]
    out = torch.empty((B, H, M, DV), dtype=query.dtype, device=query.device)
    mask, mask_strides = query, (0, 0, 0, 0)
    if attn_mask is not None:
        mask = attn_mask.expand(B, H, M, N)
        kind = kind or (1 if attn_mask.dtype == torch.bool else 2)
        mask_strides = mask.stride()
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


def attention_pattern(query, key, value, drop_mask=None, scale=1.0):
    """softmax((q @ k^T) * scale, masked_fill(drop_mask, -inf)) @ v: what rewrite() finds
    written out by hand, as one call (torch ops here, so fx's shape propagation runs it)."""
    scores = (query @ key.transpose(-2, -1)) * scale
    if drop_mask is not None:
        scores = scores.masked_fill(drop_mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value


def rewrite(gm: fx.GraphModule, infos: dict[str, Any]) -> bool:
    """Replace attention written out by hand (q @ k.transpose(-2, -1), a scale, a masked_fill
    with -inf, softmax over the last dim, @ v) by one attention_pattern call; True if any.

    `infos`: the traced shapes (trace.propagate) telling tensors from scalars.
    """
    changed = False
    for out in list(gm.graph.nodes):
        found = _pattern(out, infos)
        if found is None:
            continue
        q, k, v, drop, scale, dead = found
        with gm.graph.inserting_before(out):
            kwargs = {"drop_mask": drop, "scale": scale}
            call = gm.graph.call_function(attention_pattern, (q, k, v), kwargs)
        out.replace_all_uses_with(call)
        for n in [out, *dead]:
            if not n.users:
                gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed


def _pattern(out: fx.Node, infos: dict[str, Any]) -> tuple | None:
    def one_user(n: Any) -> bool:
        return isinstance(n, fx.Node) and len(n.users) == 1

    def tensor(n: Any) -> TensorInfo | None:
        info = infos.get(n.name) if isinstance(n, fx.Node) else None
        return info if isinstance(info, TensorInfo) else None

    if not _is_matmul(out) or len(out.args) != 2:
        return None
    probs, v = out.args
    if not (one_user(probs) and _is_softmax(probs)):
        return None
    x, dead = probs.args[0], [probs]
    drop = None
    if one_user(x) and x.op == "call_method" and x.target == "masked_fill":
        fill = x.args[2] if len(x.args) > 2 else x.kwargs.get("value")
        if not (isinstance(fill, float) and math.isinf(fill) and fill < 0):
            return None
        drop, x = x.args[1], x.args[0]
        dead.append(probs.args[0])
    scale: Any = 1.0
    if one_user(x) and x.op == "call_function" and x.target in (operator.mul, operator.truediv):
        a, b = x.args
        if tensor(a) is not None and tensor(b) is None:
            if x.target is operator.truediv:
                if isinstance(b, fx.Node):
                    return None  # a / s needs a node for 1 / s: not worth it
                b = 1.0 / b
            scale, dead = b, [*dead, x]
            x = a
        elif x.target is operator.mul and tensor(b) is not None and tensor(a) is None:
            scale, dead, x = a, [*dead, x], b
    if not (one_user(x) and _is_matmul(x) and len(x.args) == 2):
        return None
    q, kt = x.args
    if not (isinstance(kt, fx.Node) and kt.op == "call_method" and kt.target == "transpose"):
        return None
    if sorted(kt.args[1:]) != [-2, -1]:
        return None
    k = kt.args[0]
    shapes = [tensor(t) for t in (q, k, v)]
    if any(s is None for s in shapes) or (drop is not None and tensor(drop) is None):
        return None
    if not _kernel_shapes(*(s.shape for s in shapes)):  # type: ignore[union-attr]
        return None
    dead += [x] + ([kt] if len(kt.users) == 1 else [])
    return q, k, v, drop, scale, dead


def _is_matmul(n: Any) -> bool:
    if not isinstance(n, fx.Node):
        return False
    if n.op == "call_function":
        return n.target in (operator.matmul, torch.matmul)
    return n.op == "call_method" and n.target == "matmul"


def _is_softmax(n: fx.Node) -> bool:
    if n.op == "call_function" and n.target in (F.softmax, torch.softmax):
        dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
        return dim == -1 and n.kwargs.get("dtype") is None
    if n.op == "call_method" and n.target == "softmax":
        dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
        return dim == -1
    return False


def mark(graph: Graph) -> list[Node]:
    """The attention calls of `graph` the kernel takes (attrs["attention"] set on each)."""
    found = []
    for n in graph.nodes:
        if n.kind == TORCH and n.target in (F.scaled_dot_product_attention, attention_pattern):
            bound = _supported(n)
            if bound is not None:
                n.attrs["attention"] = bound
                found.append(n)
    return found


def call_args(n: Node) -> tuple[list[Any], dict[str, Any]]:
    """(positional, keyword) arguments of the launcher call replacing `n`."""
    b = n.attrs["attention"]
    names = ("attn_mask", "is_causal", "scale", "drop_mask")
    kwargs = {k: b[k] for k in names if b.get(k) is not None and b.get(k) is not False}
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
    if n.target is attention_pattern:  # rewrite() checked the shapes
        return dict(ops.bind("attention_pattern", n.args, n.kwargs))
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
    if not _kernel_shapes(q.shape, k.shape, v.shape):
        return None
    mask = b.get("attn_mask")
    if mask is not None and (not isinstance(mask, Node) or mask.shape is None):
        return None
    return b


def _kernel_shapes(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...]) -> bool:
    """Whether the kernel takes queries, keys and values of these shapes: 3- or 4-D, the same
    leading dims (no grouped or broadcast heads), matching head and key sizes, heads <= 256."""
    if len(q) not in (3, 4) or not len(q) == len(k) == len(v):
        return False
    if q[:-2] != k[:-2] or k[:-2] != v[:-2] or q[-1] != k[-1] or k[-2] != v[-2]:
        return False
    return max(q[-1], v[-1]) <= MAX_HEAD
