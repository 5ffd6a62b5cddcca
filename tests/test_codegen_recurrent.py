"""codegen/recurrent.py: nn.RNN, nn.LSTM and nn.GRU as a Triton recurrence, against torch's."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from test_codegen_harness import DEVICE, candidate_module, check_equal, task_path

from kernelwright.codegen import generate
from kernelwright.codegen.recurrent import supported


@pytest.fixture(scope="module")
def recurrent(tmp_path_factory):
    """The candidate's `_recurrent`, from the offline coder's file for the recurrent task."""
    result = generate(task_path("recurrent"))
    assert result.ok, result.reason
    assert any(g.startswith("recurrent: lstm, 2 layers") for g in result.groups), result.groups
    return candidate_module(result.source, tmp_path_factory.mktemp("recurrent"))._recurrent


def _state(kind, layers, batch, hidden, device, dtype):
    shape = (layers, batch, hidden) if batch else (layers, hidden)
    h = torch.randn(shape, device=device, dtype=dtype)
    return (h, torch.randn(shape, device=device, dtype=dtype)) if kind is nn.LSTM else h


CASES = [
    # kind, constructor keywords, (batch, steps), with a state
    (nn.LSTM, {"num_layers": 2, "batch_first": True}, (3, 5), True),
    (nn.LSTM, {"bidirectional": True, "bias": False}, (2, 4), False),
    (nn.LSTM, {}, (0, 6), True),  # unbatched: (steps, features)
    (nn.GRU, {"num_layers": 2, "bidirectional": True}, (17, 3), True),  # past one block of rows
    (nn.GRU, {"batch_first": True, "bias": False}, (2, 4), False),
    (nn.RNN, {"nonlinearity": "tanh", "num_layers": 2}, (3, 4), True),
    (nn.RNN, {"nonlinearity": "relu", "batch_first": True, "bidirectional": True}, (2, 3), False),
]


def _check(recurrent, kind, kwargs, batch, steps, with_state, features, hidden, device, dtype):
    torch.manual_seed(0)
    module = kind(features, hidden, **kwargs).to(device=device, dtype=dtype).eval()
    layers = module.num_layers * (2 if module.bidirectional else 1)
    if not batch:
        x = torch.randn(steps, features, device=device, dtype=dtype)
    elif module.batch_first:
        x = torch.randn(batch, steps, features, device=device, dtype=dtype)
    else:
        x = torch.randn(steps, batch, features, device=device, dtype=dtype)
    hx = _state(kind, layers, batch, hidden, device, dtype) if with_state else None
    with torch.no_grad():
        want, got = module(x, hx), recurrent(module, x, hx)
        # fp32 against float64, not eager: cuDNN's fp32 RNNs use TF32 where allowed (its
        # default), ~5e-4 off on the GPU, which exact fp32 products cannot match to 1e-4.
        exact = _in_float64(module, x, hx) if dtype == torch.float32 else want
    tol = {torch.float32: 1e-4, torch.float16: 1e-2}[dtype]
    flat_want, flat_got, flat_exact = _flat(want), _flat(got), _flat(exact)
    assert [t.shape for t in flat_got] == [t.shape for t in flat_want]
    for w, g, e in zip(flat_want, flat_got, flat_exact):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, e.to(g.dtype), rtol=tol, atol=tol)


def _in_float64(module, x, hx):
    import copy

    from torch.utils._pytree import tree_map

    hx64 = tree_map(lambda h: h.double() if isinstance(h, torch.Tensor) else h, hx)  # or None
    return copy.deepcopy(module).double()(x.double(), hx64)


def _flat(out):
    if isinstance(out, tuple):
        return [t for part in out for t in _flat(part)]
    return [out]


@pytest.mark.parametrize("kind, kwargs, sizes, with_state", CASES)
def test_the_recurrence_matches_torchs_module(recurrent, kind, kwargs, sizes, with_state):
    batch, steps = sizes
    _check(recurrent, kind, kwargs, batch, steps, with_state, 7, 20, DEVICE, torch.float32)


def test_fp16_states_and_outputs_keep_their_dtype(recurrent):
    _check(recurrent, nn.LSTM, {"num_layers": 2}, 3, 4, True, 7, 20, DEVICE, torch.float16)


def test_what_the_kernel_leaves_to_torch():
    assert supported(nn.LSTM(4, 8, num_layers=2, dropout=0.5)) == "dropout between layers (random)"
    with pytest.warns(UserWarning, match="dropout"):
        one_layer = nn.LSTM(4, 8, dropout=0.5)
    assert supported(one_layer) is None  # one layer: torch applies no dropout
    assert "proj_size" in supported(nn.LSTM(4, 8, proj_size=3))
    assert supported(nn.Linear(4, 8)) is not None


def test_the_recurrent_task_is_accepted_at_two_shapes(tmp_path):
    check_equal("recurrent", tmp_path, [{}, {"batch_size": 2, "seq_len": 3, "hidden_size": 40}])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("kind, kwargs, sizes, with_state", CASES)
def test_the_recurrence_on_the_gpu_past_one_block(
    recurrent, kind, kwargs, sizes, with_state, dtype
):
    # 300 hidden units: five 64-unit chunks, the last partial, ten 32-wide k blocks
    batch, steps = sizes
    _check(recurrent, kind, kwargs, batch, steps * 8, with_state, 96, 300, "cuda", dtype)
