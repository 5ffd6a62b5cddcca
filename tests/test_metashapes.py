"""sandbox/task/metashapes.py: a recurrent module's outputs on meta tensors from its sizes, the same
shapes torch computes (which it does step by step, slowly, even on meta)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from kernelwright.sandbox.task.metashapes import quick_rnns, rnn_outputs

# torch's own note that oneDNN has no LSTM with projections (the CPU falls back, correctly).
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning")


def _shapes(value):
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    return tuple(_shapes(v) for v in value)


CASES = [
    (kind, batch_first, bidirectional, layers, proj, batched)
    for kind, batch_first, bidirectional, layers, proj, batched in itertools.product(
        (nn.LSTM, nn.GRU, nn.RNN), (False, True), (False, True), (1, 3), (0, 5), (True, False)
    )
    if not (proj and kind is not nn.LSTM)
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)).replace("<class '", ""))
def test_rnn_outputs_have_the_shapes_torch_gives(case):
    kind, batch_first, bidirectional, layers, proj, batched = case
    extra = {"proj_size": proj} if proj else {}
    module = kind(7, 11, num_layers=layers, batch_first=batch_first,
                  bidirectional=bidirectional, **extra)  # fmt: skip
    shape = ((4, 6, 7) if batch_first else (6, 4, 7)) if batched else (6, 7)
    real = module(torch.randn(shape))
    with torch.device("meta"):
        meta_module = kind(7, 11, num_layers=layers, batch_first=batch_first,
                           bidirectional=bidirectional, **extra)  # fmt: skip
    quick = rnn_outputs(meta_module, torch.empty(shape, device="meta"))
    assert _shapes(quick) == _shapes(real)


def test_a_wrong_input_size_is_left_to_torch_and_forward_comes_back():
    with torch.device("meta"):
        model = nn.Sequential(nn.LSTM(7, 11))
    assert rnn_outputs(model[0], torch.empty(5, 2, 8, device="meta")) is None
    with quick_rnns(model):
        assert "forward" in vars(model[0])
        out, (h, c) = model(torch.empty(5, 2, 7, device="meta"))
        assert h.shape == (1, 2, 11)
        assert out.shape == (5, 2, 11) and c.shape == (1, 2, 11)
        with pytest.raises(RuntimeError):
            model(torch.empty(5, 2, 8, device="meta"))
    assert "forward" not in vars(model[0])
