"""The float64 reference where it fits nowhere (a 6.4 GB input on an 80 GB H100: 26 GB in float64,
over the judge's 16 GB host limit, killed the judge with `crashed [evaluator]`): the outputs are
judged against eager's without it, and the evaluation says so."""

from __future__ import annotations

import types

import pytest
import torch

from kernelwright.sandbox.judge.evaluation import Evaluation
from kernelwright.sandbox.judge.verdict import Verdict


def _evaluation(host_gb: float) -> Evaluation:
    e = Evaluation.__new__(Evaluation)
    e.torch = torch
    e.config = types.SimpleNamespace(host_memory_gb=host_gb, precision="strict")
    e.ctx = types.SimpleNamespace(dtype=torch.float32)
    e.w = types.SimpleNamespace(cuda=False)
    e.precision_where = "float64 reference on the evaluation device"
    e.mismatch = None
    e.max_abs = e.max_rel = 0.0
    e.edge_elements = 0
    e.err64 = e.eager64 = e.limit64 = None
    return e


class _NoRoomOnDevice:
    """A shape whose float64 run does not fit on the device."""

    ref_peak = footprint = 3 << 30
    input_bytes = 1 << 30
    param_bytes = 0
    _ref64_host = None

    def ref(self, x):
        return x * 2.0

    def ref64(self, x):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    def ref64_on_host(self):
        raise AssertionError("the float64 reference must not move to the host")


def test_the_host_fallback_is_taken_only_where_it_fits():
    shape = _NoRoomOnDevice()
    assert Evaluation.host_has_room_for_ref64(_evaluation(64.0), shape)
    assert not Evaluation.host_has_room_for_ref64(_evaluation(4.0), shape)


def test_no_float64_reference_then_eagers_tolerance_alone_with_a_note():
    e = _evaluation(4.0)
    x = torch.randn(64)
    ref, ref64 = e.reference(_NoRoomOnDevice(), [x])
    assert ref64 is None and torch.equal(ref, x * 2.0)
    assert "no float64 reference" in e.precision_where and "4 GB" in e.precision_where
    e.check_output(ref.clone(), ref, ref64, "trial 0")  # right: passes, no precision rule
    assert e.err64 is None
    with pytest.raises(Verdict) as wrong:
        e.check_output(ref + 1.0, ref, ref64, "trial 0")
    assert wrong.value.status == "incorrect"
