"""nn.RNN, nn.LSTM and nn.GRU as a Triton recurrence.

Per layer and direction the input's products for every step (x @ W_ih^T with the biases) are
one matmul, torch's (cuBLAS on a GPU): they do not depend on the recurrence. The recurrence runs
in one kernel launch, `_recurrent_kernel`: each program holds BLOCK_B batch rows, which are
independent of each other, over all the hidden units and all the steps, so no program waits on
another. A step reads h_{t-1} from the layer's output (h0 at the first), computes
h_{t-1} @ W_hh^T chunk by chunk of BLOCK_H units with the cell's gates fused (tanh or relu; LSTM's
i, f, g, o with c kept in fp32; GRU's r, z, n with b_hn inside r's product, as torch's), writes
h_t where the layer's output keeps it, and waits on its own threads (a barrier) before the next
step reads it. fp32 products are ieee (the strict rule); fp16/bf16 accumulate in fp32.

Not taken, left to torch: dropout between layers (random), LSTM projections (proj_size), and a
module whose weights are not its own plain parameters. Parallelism is the batch's: with few
rows one program does a layer's whole recurrence, W_hh read from L2 every step; splitting the
hidden units across programs needs a barrier between programs, which the interpreter (one
program at a time) cannot run, and is the next step once it can be timed on a GPU.
"""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from .ir import TORCH, Graph, Node
from .template import render

MODES = {"RNN_TANH": 0, "RNN_RELU": 1, "LSTM": 2, "GRU": 3}
TITLE = "recurrent"  # the helper's name less its underscore: no group's launcher may take it
HELPERS = ("_tanh",)  # ops.HELPERS the kernel calls
NAMES = {0: "rnn (tanh)", 1: "rnn (relu)", 2: "lstm", 3: "gru"}

KERNEL = '''
@triton.jit
def _recurrent_kernel(
    p_ptr,
    w_ptr,
    bn_ptr,
    h0_ptr,
    c_ptr,
    out_ptr,
    T,
    B,
    H,
    s_pt,
    s_pb,
    s_ot,
    s_ob,
    MODE: tl.constexpr,  # 0: tanh RNN, 1: relu RNN, 2: LSTM, 3: GRU
    REVERSE: tl.constexpr,
    HAS_BN: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One direction of one layer over all T steps for BLOCK_B batch rows. p: the input's
    products with the biases, (T, B, gates * H) through its strides; w: W_hh, (gates * H, H);
    bn: GRU's b_hn; h0: (B, H); c: LSTM's cell, (B, H) fp32, read and written in place; out:
    where h_t goes, (T, B, H) through its strides."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_B + tl.arange(0, BLOCK_B)
    row_ok = rows < B
    jj = tl.arange(0, BLOCK_H)
    kk = tl.arange(0, BLOCK_K)
    for step in range(0, T):
        if REVERSE:
            t = T - 1 - step
            prev = t + 1
        else:
            t = step
            prev = t - 1
        for j0 in range(0, H, BLOCK_H):
            cols = j0 + jj
            col_ok = cols < H
            ok = row_ok[:, None] & col_ok[None, :]
            a0 = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
            a1 = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
            a2 = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
            a3 = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
            for k0 in range(0, H, BLOCK_K):
                ks = k0 + kk
                k_ok = ks < H
                hm = row_ok[:, None] & k_ok[None, :]
                if step == 0:
                    h = tl.load(h0_ptr + rows[:, None] * H + ks[None, :], mask=hm, other=0.0)
                else:
                    h_offs = prev * s_ot + rows[:, None] * s_ob + ks[None, :]
                    h = tl.load(out_ptr + h_offs, mask=hm, other=0.0)
                wm = k_ok[:, None] & col_ok[None, :]
                w_offs = cols[None, :] * H + ks[:, None]
                w0 = tl.load(w_ptr + w_offs, mask=wm, other=0.0)
                a0 += tl.dot(h, w0, input_precision=PRECISION)
                if MODE >= 2:
                    w1 = tl.load(w_ptr + H * H + w_offs, mask=wm, other=0.0)
                    a1 += tl.dot(h, w1, input_precision=PRECISION)
                    w2 = tl.load(w_ptr + 2 * H * H + w_offs, mask=wm, other=0.0)
                    a2 += tl.dot(h, w2, input_precision=PRECISION)
                if MODE == 2:
                    w3 = tl.load(w_ptr + 3 * H * H + w_offs, mask=wm, other=0.0)
                    a3 += tl.dot(h, w3, input_precision=PRECISION)
            p_offs = t * s_pt + rows[:, None] * s_pb + cols[None, :]
            x0 = a0 + tl.load(p_ptr + p_offs, mask=ok, other=0.0).to(tl.float32)
            if MODE == 0:
                h_new = _tanh(x0)
            elif MODE == 1:
                h_new = tl.maximum(x0, 0.0)
            elif MODE == 2:
                x1 = a1 + tl.load(p_ptr + H + p_offs, mask=ok, other=0.0).to(tl.float32)
                x2 = a2 + tl.load(p_ptr + 2 * H + p_offs, mask=ok, other=0.0).to(tl.float32)
                x3 = a3 + tl.load(p_ptr + 3 * H + p_offs, mask=ok, other=0.0).to(tl.float32)
                c_offs = rows[:, None] * H + cols[None, :]
                c = tl.load(c_ptr + c_offs, mask=ok, other=0.0)
                c = tl.sigmoid(x1) * c + tl.sigmoid(x0) * _tanh(x2)
                tl.store(c_ptr + c_offs, c, mask=ok)
                h_new = tl.sigmoid(x3) * _tanh(c)
            else:
                r = tl.sigmoid(x0)
                z = tl.sigmoid(a1 + tl.load(p_ptr + H + p_offs, mask=ok, other=0.0).to(tl.float32))
                hn = a2
                if HAS_BN:
                    hn += tl.load(bn_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
                xn = tl.load(p_ptr + 2 * H + p_offs, mask=ok, other=0.0).to(tl.float32)
                n = _tanh(xn + r * hn)
                if step == 0:
                    before = tl.load(h0_ptr + rows[:, None] * H + cols[None, :], mask=ok, other=0.0)
                else:
                    before_offs = prev * s_ot + rows[:, None] * s_ob + cols[None, :]
                    before = tl.load(out_ptr + before_offs, mask=ok, other=0.0)
                h_new = (1.0 - z) * n + z * before.to(tl.float32)
            o_offs = t * s_ot + rows[:, None] * s_ob + cols[None, :]
            tl.store(out_ptr + o_offs, h_new.to(out_ptr.dtype.element_ty), mask=ok)
        tl.debug_barrier()  # h_t written by all of this program's threads before step t + 1


def _recurrent(module, x, hx=None):
    """module(x, hx) for an nn.RNN, nn.LSTM or nn.GRU without dropout or projections: per
    layer and direction, the input's products in one matmul and the recurrence in one launch."""
    mode = $modes[module.mode]
    gates = (1, 1, 4, 3)[mode]
    unbatched = x.dim() == 2
    x = x.unsqueeze(1) if unbatched else x
    batch_first = module.batch_first and not unbatched
    T, B = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    H, D = module.hidden_size, 2 if module.bidirectional else 1
    h0 = c0 = None
    if hx is not None:
        h0, c0 = hx if mode == 2 else (hx, None)
        if unbatched:
            h0 = h0.unsqueeze(1)
            c0 = None if c0 is None else c0.unsqueeze(1)
    hn = x.new_empty((module.num_layers * D, B, H))
    cn = x.new_empty((module.num_layers * D, B, H)) if mode == 2 else None
    block_h = max(16, min(64, triton.next_power_of_2(H)))
    block_k = max(16, min(32, triton.next_power_of_2(H)))
    layer = x.contiguous()
    for lyr in range(module.num_layers):
        out = x.new_empty((B, T, D * H) if batch_first else (T, B, D * H))
        s_ot, s_ob = (D * H, T * D * H) if batch_first else (B * D * H, D * H)
        s_pt, s_pb = (gates * H, T * gates * H) if batch_first else (B * gates * H, gates * H)
        for d in range(D):
            k = lyr * D + d
            weights = module.all_weights[k]  # w_ih, w_hh[, b_ih, b_hh] of layer lyr, direction d
            w_ih, w_hh = weights[0], weights[1].contiguous()
            p = layer.reshape(-1, layer.shape[-1]) @ w_ih.t()
            bn = p
            if module.bias:
                b_ih, b_hh = weights[2], weights[3]
                if mode == 3:  # b_hn stays inside r's product
                    p = p + torch.cat([b_ih[: 2 * H] + b_hh[: 2 * H], b_ih[2 * H :]])
                    bn = b_hh[2 * H :].contiguous()
                else:
                    p = p + (b_ih + b_hh)
            h_init = (x.new_zeros((B, H)) if h0 is None else h0[k]).contiguous()
            c = x.new_zeros((B, H), dtype=torch.float32)
            if c0 is not None:
                c.copy_(c0[k])
            view = out[..., d * H : (d + 1) * H]
            _recurrent_kernel[(triton.cdiv(B, 16),)](
                p.contiguous(),
                w_hh,
                bn,
                h_init,
                c,
                view,
                T,
                B,
                H,
                s_pt,
                s_pb,
                s_ot,
                s_ob,
                MODE=mode,
                REVERSE=bool(d),
                HAS_BN=mode == 3 and module.bias,
                BLOCK_B=16,
                BLOCK_H=block_h,
                BLOCK_K=block_k,
                PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
                num_warps=4,
            )
            last = T - 1 if d == 0 else 0
            hn[k] = view[:, last] if batch_first else view[last]
            if cn is not None:
                cn[k] = c
        layer = out
    if unbatched:
        out, hn = out.squeeze(1), hn.squeeze(1)
        cn = None if cn is None else cn.squeeze(1)
    return (out, (hn, cn)) if mode == 2 else (out, hn)
'''


def supported(module: Any) -> str | None:
    """Why `module` is left to torch, or None when the kernel takes it."""
    if not isinstance(module, nn.RNNBase) or module.mode not in MODES:
        return "not an nn.RNN, nn.LSTM or nn.GRU"
    if module.dropout and module.num_layers > 1:
        return "dropout between layers (random)"
    if getattr(module, "proj_size", 0):
        return "an LSTM with projections (proj_size)"
    own = dict(module.named_parameters(recurse=False))
    if any(name not in own for name in module._flat_weights_names):
        return "its weights are not its own parameters"
    return None


def attach(node: Node, module: Any) -> None:
    """Mark the torch node of a recurrent module's call the kernel takes."""
    if supported(module) is None:
        node.attrs["recurrent"] = {
            "mode": MODES[module.mode],
            "layers": module.num_layers,
            "bidirectional": module.bidirectional,
        }


def mark(graph: Graph) -> list[Node]:
    """The recurrent modules' calls of `graph` the kernel takes."""
    return [n for n in graph.nodes if n.kind == TORCH and "recurrent" in n.attrs]


def summary(calls: list[Node]) -> str:
    kinds = []
    for n in calls:
        r = n.attrs["recurrent"]
        text = f"{NAMES[r['mode']]}, {r['layers']} layer{'s' if r['layers'] > 1 else ''}"
        text += ", bidirectional" if r["bidirectional"] else ""
        if text not in kinds:
            kinds.append(text)
    return f"recurrent: {'; '.join(kinds)} (input products by matmul, one launch per direction)"


def source() -> list[str]:
    """The kernel and its launcher, as lines (the kernel calls HELPERS)."""
    return render(KERNEL, modes=repr(MODES))
