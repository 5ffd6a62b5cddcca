"""The runtime guard's canary: a new kernel version on a fraction of calls, shadow-checked and
timed beside the current kernel, promoted or rolled back on its thresholds, each decision
recorded; and the rule itself (decisions.canary_decision)."""

from __future__ import annotations

import json
import logging
import time

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernelwright.decisions import canary_decision
from kernelwright.runtime import CanaryPolicy, guard


class Silu(nn.Module):
    def __init__(self, delay_s: float = 0.0, delta: float = 0.0):
        super().__init__()
        self.delay_s, self.delta = delay_s, delta

    def forward(self, x):
        if self.delay_s:
            time.sleep(self.delay_s)  # a slower kernel, as perf_counter sees it on the CPU
        return F.silu(x) + self.delta


POLICY = CanaryPolicy(min_calls=15, max_faults=0, max_latency_ratio=1.0)


def _run_until_decided(g, x, limit: int = 2000) -> int:
    for i in range(limit):
        g(x)
        if g.decisions:
            return i + 1
    raise AssertionError(f"no decision after {limit} calls: {g.canary_decision()}")


def test_a_faster_right_canary_is_promoted(caplog):
    caplog.set_level(logging.INFO, logger="kernelwright.runtime")
    slow, fast = Silu(delay_s=0.002), Silu()
    g = guard(Silu(), slow, shadow_rate=0.0, canary=(fast, 0.25, "2"), canary_policy=POLICY)
    x = torch.randn(4, 8)
    assert g.stats()["canary"]["version"] == "2"
    with pytest.raises(RuntimeError, match="canary not promoted: hold"):
        g.promote()  # no calls yet: the thresholds do not allow it
    calls = _run_until_decided(g, x)
    (decision,) = g.decisions
    assert decision.action == "promote" and decision.version == "2"
    assert decision.from_version == "1" and decision.faults == 0 and decision.calls >= 15
    assert decision.canary_p50_s < decision.control_p50_s
    assert g.optimized is fast and g.version == "2" and g.stats()["canary"] is None
    assert g.stats()["decisions"][0]["action"] == "promote" and calls < 2000
    logged = [json.loads(r.getMessage()) for r in caplog.records]
    assert [e["event"] for e in logged if e["event"].startswith("canary-")] == [
        "canary-start",
        "canary-promote",
    ]


def test_a_wrong_canary_is_rolled_back_at_its_first_fault_and_never_answers():
    current, wrong = Silu(), Silu(delta=1.0)
    g = guard(Silu(), current, shadow_rate=0.0, canary=(wrong, 0.3), canary_policy=POLICY)
    x = torch.randn(4, 8)
    outs = []
    while not g.decisions:
        outs.append(g(x))
    assert all(torch.allclose(o, F.silu(x)) for o in outs)  # the faulty call got the reference's
    (decision,) = g.decisions
    assert decision.action == "rollback" and decision.faults == 1
    assert "1 faulty calls" in decision.reason and g.optimized is current
    assert g.stats()["falling_back"] is None  # the current kernel was never at fault


def test_a_slower_canary_is_rolled_back():
    g = guard(
        Silu(), Silu(), shadow_rate=0.0, canary=(Silu(delay_s=0.002), 0.25), canary_policy=POLICY
    )
    _run_until_decided(g, torch.randn(2, 2))
    assert g.decisions[0].action == "rollback" and "slower than allowed" in g.decisions[0].reason


def test_manual_decisions_when_automatic_ones_are_off():
    off = CanaryPolicy(min_calls=5, auto=False)
    new = Silu()
    g = guard(Silu(), Silu(delay_s=0.001), shadow_rate=0.0, canary=(new, 0.5), canary_policy=off)
    x = torch.randn(2, 2)
    for _ in range(60):
        g(x)
    assert not g.decisions and g.canary_decision()[0] == "promote"
    decision = g.promote()
    assert decision.action == "promote" and g.optimized is new
    g.set_canary(Silu(), 0.1, version="3")
    assert g.rollback("a bad deploy").reason == "a bad deploy"
    assert [d.action for d in g.decisions] == ["promote", "rollback"]
    with pytest.raises(RuntimeError, match="no canary"):
        g.rollback()
    g.set_canary(Silu(), 0.1)
    assert g.promote(force=True).reason.startswith("forced (")


@pytest.mark.parametrize(
    ("figures", "action"),
    [
        ({"calls": 500, "faults": 1}, "rollback"),
        ({"calls": 50, "faults": 0}, "hold"),
        ({"calls": 500, "faults": 0, "timed": 10}, "hold"),
        ({"calls": 500, "faults": 0, "canary_s": 1.1e-5}, "rollback"),
        ({"calls": 500, "faults": 0, "canary_s": 0.9e-5}, "promote"),
        ({"calls": 500, "faults": 0, "canary_s": 1.04e-5, "max_latency_ratio": 1.05}, "promote"),
    ],
)
def test_canary_decision(figures, action):
    given = {"canary_s": 1e-5, "control_s": 1e-5, "timed": 200, "min_calls": 100}
    given |= {"max_faults": 0, "max_latency_ratio": 1.0} | figures
    assert canary_decision(**given)[0] == action
