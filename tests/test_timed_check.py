"""The timed calls' output check: an allclose miss on an ill-conditioned output is judged against
float64 (as accurate as eager: passes, with a note), a memoised or stale output fails."""

from __future__ import annotations

import copy
import types

import torch

from kernelwright.sandbox.config import EvalConfig
from kernelwright.sandbox.worker import Evaluation


class MatmulSum(torch.nn.Module):
    """x @ w then a sum over the features: long fp32 sums with cancellation."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(512, 256))

    def forward(self, x):
        return (x @ self.w).sum(dim=1)


def _evaluation() -> Evaluation:
    ref = MatmulSum()
    main = types.SimpleNamespace(ref=ref, ref64=copy.deepcopy(ref).double())
    e = Evaluation.__new__(Evaluation)  # only what judge_timed_mismatch reads
    e.torch = torch
    e.ctx = types.SimpleNamespace(main=main, dtype=torch.float32)
    e.config = EvalConfig()
    e.timed_edge_cases = 0
    return e


def test_an_output_as_accurate_as_eager_passes_with_a_note_count():
    torch.manual_seed(0)
    e = _evaluation()
    x = torch.randn(64, 512)
    with torch.no_grad():
        eager = e.ctx.main.ref(x)
        truth = e.ctx.main.ref64(x.double())
    # Another fp32 rounding of the same sums: as far from the truth as eager, on the other side.
    honest = (truth + (truth - eager.double())).float()
    failures: list = []
    e.judge_timed_mismatch(3, honest, eager, [x], failures)
    assert failures == [] and e.timed_edge_cases == 1


def test_a_memoised_or_partial_output_fails_as_drift():
    torch.manual_seed(0)
    e = _evaluation()
    x, other = torch.randn(64, 512), torch.randn(64, 512)
    with torch.no_grad():
        eager = e.ctx.main.ref(x)
        stale = e.ctx.main.ref(other)  # the right answer for an earlier input
    partial = eager.clone()
    partial[-1] = 0.0  # one element left unwritten
    for wrong in (stale, partial):
        failures: list = []
        e.judge_timed_mismatch(7, wrong, eager, [x], failures)
        assert len(failures) == 1 and failures[0][0] == "drift", failures
        assert "timed call 7" in failures[0][1] and "float64" in failures[0][1]
    assert e.timed_edge_cases == 0
