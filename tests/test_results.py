"""EvalResult and Baseline: frozen, JSON round-trippable, bounded messages, honest summaries."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from kernelwright.sandbox.results import (
    MAX_MESSAGE_CHARS,
    Baseline,
    Correctness,
    Environment,
    EvalResult,
    KernelStats,
    Mismatch,
    OpTime,
    Roofline,
    Timing,
    Timings,
)

FULL = EvalResult(
    status="incorrect",
    rule="mismatch",
    message="out: 3 of 10 elements differ",
    task="gelu",
    shape_overrides={"dim": 64},
    correctness=Correctness(
        trials=3,
        seeds=(1, 2, 3),
        shapes=({"dim": 64}, {"dim": 55}),
        err_vs_fp64=float("inf"),
        mismatch=Mismatch("out[1]", 3, 10, 0.5, float("nan"), (((1, 2), 0.25, -1.0),)),
    ),
    timings=Timings(meaningful=True, candidate=Timing(1.5, 1.4, 1.6, 1.3, 2.0, 50)),
    roofline=Roofline(10, 20, 4200.0, 400.0, 0.001, "memory", fraction=0.5),
    kernels=(KernelStats("_k", num_warps=4, registers=32, launches=2),),
    environment=Environment(
        device="cuda", gpu="H200", torch="2.11", triton="3.6", isolation=("netns", "audit-hook")
    ),
)


def test_round_trip_keeps_every_field_including_nan_and_inf():
    again = EvalResult.from_json(FULL.to_json())
    assert again.to_json() == FULL.to_json()
    assert again.correctness.mismatch.first_bad == (((1, 2), 0.25, -1.0),)
    assert math.isnan(again.correctness.mismatch.max_rel_err)
    assert again.correctness.err_vs_fp64 == float("inf")
    assert again.environment.isolation == ("netns", "audit-hook")
    json.loads(FULL.to_json())  # strict JSON: no bare NaN/Infinity tokens


def test_results_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        FULL.status = "ok"  # type: ignore[misc]


def test_unknown_status_is_refused():
    with pytest.raises(ValueError, match="unknown status"):
        EvalResult(status="passed")  # type: ignore[arg-type]


def test_message_is_bounded_keeping_head_and_tail():
    text = "first error line\n" + "x" * 20000 + "\nLastError: the real cause"
    r = EvalResult(status="runtime_error", message=text)
    assert len(r.message) <= MAX_MESSAGE_CHARS
    assert r.message.startswith("first error line") and r.message.endswith("the real cause")
    assert "characters cut" in r.message


def test_summary_says_why_or_how_fast():
    assert FULL.summary().startswith("incorrect [mismatch]: out: 3 of 10")
    ok = EvalResult(
        status="ok",
        speedup_eager=2.0,
        speedup_compiled=1.25,
        roofline=dataclasses.replace(FULL.roofline, fraction=0.8),
    )
    assert ok.summary() == "ok, 2.00x vs eager, 1.25x vs torch.compile, 80% of roofline"
    cpu = EvalResult(status="ok", timings=Timings(meaningful=False))
    assert "no meaningful timing" in cpu.summary()


def test_environment_key_separates_gpus_and_versions():
    a = Environment(device="cuda", gpu="H200", torch="2.11", triton="3.6")
    assert a.key != dataclasses.replace(a, triton="3.7").key
    assert a.key != dataclasses.replace(a, gpu="H100").key


def test_baseline_round_trip_with_ops():
    b = Baseline(status="ok", ops=(OpTime("aten::addmm", 1, 0.7, 0.7),), ops_note="profiler")
    assert Baseline.from_dict(json.loads(json.dumps(b.to_dict()))) == b
