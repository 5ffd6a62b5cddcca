"""Shapes of modules that torch is slow to run on meta tensors, computed from their sizes.

Sizing a task (sandbox/task/'s probes) and tracing it (codegen/trace.py) run the model on the
meta device, where nothing is computed; but a recurrent module still runs step by step there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


def rnn_outputs(module: nn.RNNBase, x: Any, hx: Any = None) -> Any:
    """An RNN/LSTM/GRU's outputs on meta tensors from its sizes alone, or None to run it.

    On meta tensors torch runs a recurrent module step by step: a level-3 LSTM over 512 steps
    took 50 s per build, and the codegen builds a model several times per dtype.
    """
    if not isinstance(x, torch.Tensor) or x.device.type != "meta" or x.dim() not in (2, 3):
        return None
    if x.shape[-1] != module.input_size or (hx is not None and not _meta(hx)):
        return None  # let torch say what is wrong
    batched = x.dim() == 3
    seq = x.shape[1] if batched and module.batch_first else x.shape[0]
    batch = (x.shape[0] if module.batch_first else x.shape[1]) if batched else None
    dirs = 2 if module.bidirectional else 1
    proj = getattr(module, "proj_size", 0) or 0
    out_size = proj or module.hidden_size
    lead = (batch,) if batch is not None else ()

    def empty(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=x.dtype, device="meta")

    if batched and module.batch_first:
        output = empty(batch, seq, dirs * out_size)  # type: ignore[arg-type]
    else:
        output = empty(seq, *lead, dirs * out_size)
    h_n = empty(dirs * module.num_layers, *lead, out_size)
    if isinstance(module, nn.LSTM):
        c_n = empty(dirs * module.num_layers, *lead, module.hidden_size)
        return output, (h_n, c_n)
    return output, h_n


@contextlib.contextmanager
def quick_rnns(model: nn.Module) -> Iterator[None]:
    """Within: the model's recurrent modules answer meta inputs with rnn_outputs."""
    patched = []
    for m in model.modules():
        if isinstance(m, nn.RNNBase):
            original = m.forward

            def forward(x, hx=None, _m=m, _original=original):
                shaped = rnn_outputs(_m, x, hx)
                return shaped if shaped is not None else _original(x, hx)

            m.forward = forward
            patched.append(m)
    try:
        yield
    finally:
        for m in patched:
            del m.forward


def _meta(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.device.type == "meta"
    return isinstance(value, (tuple, list)) and all(_meta(v) for v in value)
