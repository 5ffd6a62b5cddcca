"""The decisions, in one place: which candidate is best, what a run judged against, what counts
as a regression, fast_p, and whether the runtime guard promotes a canary kernel.

Pure functions on plain data (numbers, mappings, sequences, run.json as read), so that the agents,
the store, the suite, the nightly job and the reports all decide the same way. Imports only the
standard library and sandbox/. The verdict's prose is report/verdict.py's; who runs a run (the
/proc reads) is run/owner.py's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .sandbox.results import fault_of

T = TypeVar("T")

# -- better, best ---------------------------------------------------------------------------------

# The reference's own speedup over eager: a candidate must beat it to replace the reference.
REFERENCE_SPEEDUP = 1.0

# What a kernel must beat to win (--baseline): the faster of PyTorch eager and torch.compile
# (the default: a user who could call torch.compile judges the kernel against that), eager alone,
# or torch.compile alone. Where torch.compile was not timed (turned off, or it failed), eager.
BASELINES = ("fastest", "eager", "compile")


def baseline_speedup(
    eager: float | None, compiled: float | None, baseline: str = "fastest"
) -> float | None:
    """A kernel's speedup over the baseline it is judged against, from its speedups over eager
    and over torch.compile (None: not measured)."""
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}: one of {', '.join(BASELINES)}")
    eager, compiled = finite(eager), finite(compiled)
    if baseline == "eager" or compiled is None:
        return eager
    if baseline == "compile" or eager is None:
        return compiled
    return min(eager, compiled)


def speedup_of(row: Mapping[str, Any], baseline: str = "fastest") -> float | None:
    """baseline_speedup of a candidate row or result (speedup_eager, speedup_compiled)."""
    return baseline_speedup(row.get("speedup_eager"), row.get("speedup_compiled"), baseline)


def finite(value: Any) -> float | None:
    """`value` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def is_better(new: float | None, old: float | None, *, margin: float = 0.0) -> bool:
    """Whether speedup `new` beats `old`: by more than `margin` (0.01 = 1%) when both are measured,
    strictly (a tie keeps the old); a measured speedup beats an unmeasured one (None), and an
    unmeasured one beats nothing."""
    new, old = finite(new), finite(old)
    if new is None:
        return False
    if old is None:
        return True
    return new > old * (1.0 + margin)


def replaces_best(new: float | None, old: float | None) -> bool:
    """Whether a newly verified kernel with speedup `new` replaces the recorded best (`old`): when
    it is_better, or when neither was timed (the Triton interpreter), where the latest
    verification holds the record."""
    if finite(new) is None and finite(old) is None:
        return True
    return is_better(new, old)


def fastest(
    items: Iterable[T],
    speedup: Callable[[T], float | None],
    *,
    must_beat: float | None = None,
) -> T | None:
    """The item with the best `speedup` (is_better: the earliest wins a tie, a measured one beats
    an unmeasured one), among those that beat `must_beat` when it is given; None if none."""
    best: T | None = None
    for item in items:
        if must_beat is not None and not is_better(speedup(item), must_beat):
            continue
        if best is None or is_better(speedup(item), speedup(best)):
            best = item
    return best


def winner(
    verified: Sequence[T], speedup: Callable[[T], float | None], *, timing_meaningful: bool
) -> T | None:
    """The verified candidate that replaces the reference, or None (the reference stays).

    With meaningful timings: the fastest that beats the reference (a `speedup` above 1; callers
    pass the speedup over the run's baseline, baseline_speedup).
    Without (the Triton interpreter: correctness only): the first verified candidate.
    """
    if not timing_meaningful:
        return verified[0] if verified else None
    return fastest(verified, speedup, must_beat=REFERENCE_SPEEDUP)


# -- regressions (nightly) ------------------------------------------------------------------------

# Night-over-night, a kernel is a regression when its median time grows by more than this. Medians
# of 50 interleaved, L2-flushed calls move a few percent between nights on a quiet GPU; 10% is
# clear of that noise and still catches a lost fusion or a bad autotune pick.
NIGHTLY_SLOWDOWN = 0.10


def slowdown(latest: Mapping[str, Any], previous: Mapping[str, Any]) -> float | None:
    """How much slower the kernel got (0.12 = 12% slower): its own median time when both nights
    have one (eager moving with a torch upgrade is not the kernel's doing), else speedups."""
    now_ms, then_ms = finite(latest.get("candidate_ms")), finite(previous.get("candidate_ms"))
    if now_ms and then_ms:
        return now_ms / then_ms - 1.0
    now_x, then_x = finite(latest.get("speedup_eager")), finite(previous.get("speedup_eager"))
    if now_x and then_x:
        return then_x / now_x - 1.0
    return None


def canary_decision(
    *,
    calls: int,
    faults: int,
    canary_s: float | None,
    control_s: float | None,
    timed: int,
    min_calls: int,
    max_faults: int,
    max_latency_ratio: float,
) -> tuple[str, str]:
    """("promote" | "rollback" | "hold", why) for a canary kernel in the runtime guard.

    `faults`: its shadow-check mismatches, NaN/Inf and exceptions; `canary_s` and `control_s`:
    median device times of the canary and of the current kernel over the calls timed side by
    side (`timed`: the fewer of the two counts). More faults than `max_faults` roll it back at
    once; with `min_calls` calls and as many timed pairs, it is promoted when its median is
    within `max_latency_ratio` of the current kernel's (1.0: no slower), else rolled back.
    """
    if faults > max_faults:
        return "rollback", f"{faults} faulty calls of {calls} (at most {max_faults} allowed)"
    if calls < min_calls or timed < min_calls:
        return "hold", f"{calls} calls, {timed} timed of the {min_calls} needed"
    canary, control = finite(canary_s), finite(control_s)
    if canary is None or not control:
        return "hold", "no latency measured yet"
    ratio = canary / control
    figures = f"median {canary * 1e6:.1f} us vs {control * 1e6:.1f} us ({ratio:.3f}x)"
    if ratio <= max_latency_ratio:
        return "promote", f"{calls} calls, no fault past the limit, {figures}"
    return "rollback", f"slower than allowed ({max_latency_ratio:.2f}x): {figures}"


def measured(row: Mapping[str, Any]) -> bool:
    """A history row that says something about the kernel: not an evaluator error."""
    return fault_of(str(row["status"]), row.get("rule")) != "evaluator"


def night_verdict(
    latest: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    threshold: float = NIGHTLY_SLOWDOWN,
) -> dict[str, Any]:
    """The latest nightly row judged against the one before it (the latest earlier row that was
    `measured`, or None): {"slowdown", "reason", "regression", "evaluator_error", "task_error"}.

    A regression is a kernel that is no longer ok (incorrect, failing to compile, crashing...) or
    that got slower by more than `threshold`. An evaluator error (kernelwright's fault) and a task
    error (the reference itself fails) are not the kernel's: they are flagged apart.
    """
    change = slowdown(latest, previous) if previous and previous["status"] == "ok" else None
    status = str(latest["status"])
    fault = fault_of(status, latest.get("rule")) if status != "ok" else ""
    rule = f" [{latest['rule']}]" if latest.get("rule") else ""
    reason = ""
    if fault == "evaluator":
        reason = f"evaluator error{rule}: kernelwright failed, not the kernel"
    elif fault == "task":
        reason = f"task error{rule}: the reference itself fails"
    elif status != "ok":
        reason = f"now {status}{rule}"
    elif previous is not None and change is not None and change > threshold:
        when = (
            f"the earlier run of {previous['night']}"
            if previous["night"] == latest["night"]
            else previous["night"]
        )
        reason = f"{change:.0%} slower than {when}"
    return {
        "slowdown": change,
        "reason": reason,
        "regression": bool(reason) and fault not in ("evaluator", "task"),
        "evaluator_error": fault == "evaluator",
        "task_error": fault == "task",
    }


# -- fast_p (suites) ------------------------------------------------------------------------------

# KernelBench's thresholds: fast_p is the fraction of tasks that are correct and more than p times
# faster than the baseline; fast_0 is the correctness rate.
FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
FAST_P_BASELINES = (("eager", "speedup_eager"), ("compiled", "speedup_compiled"))


def fast_p(rows: Sequence[Mapping[str, Any]], key: str, p: float) -> float | None:
    """The fraction of *all* `rows` (tasks) that are correct and whose `key` speedup is more than
    `p` (strict >); None for no rows. fast_0 is the correctness rate: an unmeasured correct task
    still counts there."""
    if not rows:
        return None
    if p == 0:  # every measured speedup is > 0, and an unmeasured correct task still counts
        return sum(bool(r["correct"]) for r in rows) / len(rows)
    hits = sum(bool(r["correct"]) and is_better(r.get(key), p) for r in rows)
    return hits / len(rows)


def fast_p_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """{"eager": {"0": ..., "1": ..., "1.5": ..., "2": ...}, "compiled": {...}}."""
    return {
        baseline: {f"{p:g}": fast_p(rows, key, p) for p in FAST_P_THRESHOLDS}
        for baseline, key in FAST_P_BASELINES
    }


# -- what a run judged against ------------------------------------------------------------------


def run_baseline(run: Mapping[str, Any]) -> str:
    """The baseline a run judged its kernels against: its config's, else "eager" (a run from
    before --baseline, whose best was chosen against eager alone)."""
    config = run.get("config")
    value = config.get("baseline") if isinstance(config, Mapping) else None
    return value if value in BASELINES else "eager"
