"""The decisions (decisions.py) at their edges: equal times, the margin, missing timings, fast_p
with incorrect tasks and the nightly regression rule (the verdict's text: test_report_verdict.py;
a run's status: test_run_status.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from kernelwright.decisions import (
    BASELINES,
    FAST_P_THRESHOLDS,
    NIGHTLY_SLOWDOWN,
    baseline_speedup,
    fast_p,
    fast_p_summary,
    fastest,
    is_better,
    night_verdict,
    replaces_best,
    slowdown,
    winner,
)

# -- is_better, fastest, winner -------------------------------------------------------------------


def test_is_better_is_strict_a_tie_keeps_the_old():
    assert is_better(1.5, 1.2)
    assert not is_better(1.2, 1.5)
    assert not is_better(1.5, 1.5)  # equal times: the one already chosen stays


def test_is_better_with_a_margin():
    assert not is_better(1.01, 1.0, margin=0.01)  # exactly the margin is not more than it
    assert is_better(1.0101, 1.0, margin=0.01)
    assert not is_better(1.005, 1.0, margin=0.01)  # inside the noise


def test_is_better_with_missing_timings():
    assert is_better(1.1, None)  # a measured speedup beats an unmeasured one
    assert not is_better(None, 1.1)
    assert not is_better(None, None)  # nothing to tell them apart: the old stays
    assert not is_better(math.nan, 1.0) and is_better(1.0, math.nan)  # NaN is not a measurement
    assert not is_better(True, 0.5)  # a bool is not a number here


def test_a_new_best_replaces_the_record_when_better_or_when_neither_was_timed():
    assert replaces_best(1.6, 1.5) and not replaces_best(1.5, 1.5)
    assert not replaces_best(None, 1.5) and replaces_best(1.5, None)
    assert replaces_best(None, None)  # the interpreter: the latest verification holds it


def test_fastest_keeps_the_earliest_of_equals_and_prefers_a_measured_one():
    rows = [("a", None), ("b", 2.0), ("c", 2.0), ("d", 1.0)]
    assert fastest(rows, lambda r: r[1]) == ("b", 2.0)
    assert fastest([("a", None), ("b", None)], lambda r: r[1]) == ("a", None)
    assert fastest([], lambda r: r) is None
    # must_beat: the reference's 1.0 is not beaten by 1.0 itself.
    assert fastest([("x", 1.0), ("y", None)], lambda r: r[1], must_beat=1.0) is None
    assert fastest([("x", 1.0), ("y", 1.2)], lambda r: r[1], must_beat=1.0) == ("y", 1.2)


def test_winner_with_and_without_meaningful_timings():
    verified = [("slow", 0.9), ("tie", 1.0), ("fast", 1.3), ("also fast", 1.3)]
    assert winner(verified, lambda r: r[1], timing_meaningful=True) == ("fast", 1.3)
    assert winner(verified[:2], lambda r: r[1], timing_meaningful=True) is None  # reference stays
    # The interpreter times nothing: the first verified candidate, whatever its numbers.
    assert winner(verified, lambda r: r[1], timing_meaningful=False) == ("slow", 0.9)
    assert winner([], lambda r: r[1], timing_meaningful=False) is None


def test_the_agents_state_and_the_store_decide_alike(tmp_path):
    from kernelwright.agents.state import Candidate, best_candidate
    from kernelwright.sandbox.results import Environment, EvalResult
    from kernelwright.store import Store

    def cand(index: int, speedup: float | None) -> Candidate:
        result = EvalResult(status="ok", speedup_eager=speedup) if speedup is not None else None
        return Candidate(round=1, index=index, source="x", status="ok", result=result)

    cands = [cand(1, 1.2), cand(2, 1.5), cand(3, 1.5)]
    assert best_candidate(cands, timing_meaningful=True).index == 2  # equal: the earliest

    env = Environment(device="cuda", gpu="NVIDIA H100", torch="2.11.0", triton="3.6.0")

    def ok(speedup: float | None, h: str) -> EvalResult:
        return EvalResult(status="ok", task_hash="t", source_hash=h, speedup_eager=speedup,
                          environment=env)  # fmt: skip

    store = Store(tmp_path / "s.db")
    assert store.set_best_kernel("a", ok(1.5, "a"))
    assert not store.set_best_kernel("b", ok(1.5, "b"))  # a tie keeps the stored best
    assert not store.set_best_kernel("c", ok(None, "c"))  # unmeasured never beats measured
    assert store.set_best_kernel("d", ok(1.6, "d"))
    assert store.best_kernel("t", env.key).source == "d"
    other = Environment(device="cpu", torch="2.13.0", triton="3.7.0", interpreter=True)
    untimed = [dataclasses.replace(ok(None, h), environment=other) for h in ("e", "f")]
    assert store.set_best_kernel("e", untimed[0]) and store.set_best_kernel("f", untimed[1])
    assert store.best_kernel("t", other.key).source == "f"  # neither timed: the latest


# -- fast_p ---------------------------------------------------------------------------------------


def rows(*specs):
    return [{"correct": c, "speedup_eager": e, "speedup_compiled": k} for c, e, k in specs]


def test_fast_p_counts_all_tasks_and_only_the_correct_ones():
    tasks = rows(
        (True, 2.5, 1.1),
        (True, 1.5, 0.9),  # exactly 1.5: not *more* than 1.5
        (True, None, None),  # correct, not timed: counts for fast_0 only
        (False, 9.0, 9.0),  # fast but incorrect: never counts
    )
    assert fast_p(tasks, "speedup_eager", 0.0) == 0.75  # the correctness rate
    assert fast_p(tasks, "speedup_eager", 1.0) == 0.5
    assert fast_p(tasks, "speedup_eager", 1.5) == 0.25
    assert fast_p(tasks, "speedup_eager", 2.0) == 0.25
    assert fast_p(tasks, "speedup_compiled", 1.0) == 0.25
    assert fast_p([], "speedup_eager", 1.0) is None


def test_fast_p_summary_has_every_threshold_for_both_baselines():
    summary = fast_p_summary(rows((False, 3.0, 3.0)))
    assert list(summary) == ["eager", "compiled"]
    assert list(summary["eager"]) == [f"{p:g}" for p in FAST_P_THRESHOLDS] == ["0", "1", "1.5", "2"]
    assert set(summary["compiled"].values()) == {0.0}


# -- regressions ----------------------------------------------------------------------------------


def night(n: str, status: str = "ok", ms: float | None = 1.0, x: float | None = 2.0, **kw):
    return {"night": n, "status": status, "candidate_ms": ms, "speedup_eager": x, **kw}


def test_slowdown_from_the_kernels_own_time_else_from_speedups():
    assert slowdown(night("2", ms=1.2), night("1", ms=1.0)) == pytest.approx(0.2)
    # No kernel time on one night: speedups (eager moving with torch is not the kernel's doing).
    assert slowdown(night("2", ms=None, x=1.6), night("1", x=2.0)) == pytest.approx(0.25)
    assert slowdown(night("2", ms=None, x=None), night("1", ms=None)) is None


def test_a_slowdown_up_to_the_threshold_is_not_a_regression():
    edge = 1.0 + NIGHTLY_SLOWDOWN
    at = night_verdict(night("2", ms=edge - 1e-12), night("1"))
    assert not at["regression"] and at["reason"] == ""
    past = night_verdict(night("2", ms=1.2), night("1"))
    assert past["regression"] and past["reason"] == "20% slower than 1"
    same_night = night_verdict(night("1", ms=1.2), night("1"))
    assert same_night["reason"] == "20% slower than the earlier run of 1"
    assert night_verdict(night("2", ms=1.2), night("1"), threshold=0.25)["regression"] is False


def test_failures_are_regressions_but_evaluator_and_task_errors_are_not():
    now_wrong = night_verdict(night("2", "incorrect", rule="mismatch"), night("1"))
    assert now_wrong["regression"] and now_wrong["reason"] == "now incorrect [mismatch]"
    internal = night_verdict(night("2", "crashed", rule="worker-start"), night("1"))
    assert internal["evaluator_error"] and not internal["regression"]
    task = night_verdict(night("2", "runtime_error", rule="task"), night("1"))
    assert task["task_error"] and not task["regression"]
    # A first night, or a previous night that failed: nothing to be slower than.
    assert night_verdict(night("1", ms=5.0), None) == {
        "slowdown": None,
        "reason": "",
        "regression": False,
        "evaluator_error": False,
        "task_error": False,
    }
    assert night_verdict(night("2", ms=5.0), night("1", "incorrect"))["slowdown"] is None


def test_the_baseline_is_the_faster_of_eager_and_torch_compile_by_default():
    assert BASELINES == ("fastest", "eager", "compile")
    assert baseline_speedup(3.8, 0.22) == 0.22
    assert baseline_speedup(3.8, 0.22, "eager") == 3.8
    assert baseline_speedup(1.2, 1.5, "compile") == 1.5
    assert baseline_speedup(1.2, None, "compile") == 1.2  # torch.compile not timed: eager's
    assert baseline_speedup(None, None) is None
    with pytest.raises(ValueError, match="unknown baseline"):
        baseline_speedup(1.0, 1.0, "cudnn")
