"""The decisions, in one place: which candidate is best, what counts as a regression, fast_p, the
verdict text, a run's true status, what a run judged its candidates at, and whether the runtime
guard promotes a canary kernel.

Pure functions on plain data (numbers, mappings, sequences, run.json as read), so that the agents,
the store, the suite, the nightly job and the reports all decide the same way. Imports only the
standard library and sandbox/.
"""

from __future__ import annotations

import math
import os
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .sandbox.results import STATUSES, fault_of

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


# -- what a run judged at -------------------------------------------------------------------------


def sizes_text(sizes: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "no size constants"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sized_by(run: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """Why the sizes are what they are: "task", "shape" or "shrink". run.json records it now;
    before, its notes said so (the shrink wrote its sizes into config.shapes too, so those alone
    cannot tell)."""
    if run.get("sized_by") in ("task", "shape", "shrink"):
        return str(run["sized_by"])
    if any("task shrunk to" in str(n) for n in run.get("notes") or []):
        return "shrink"
    return "shape" if config.get("shapes") else "task"


def judged_text(run: Mapping[str, Any], also_checked: Mapping[str, Any] | None = None) -> str:
    """What a run judged its candidates at: dtype, precision policy and the sizes actually used,
    with why they differ from the task's own (--shape, or the shrink for the CPU interpreter).

    'fp32, precision strict, at batch_size=32, dim=1536: shrunk for the Triton interpreter (no
    CUDA) from the task's batch_size=4096, dim=393216; also checked at batch_size=27, dim=1317'
    """
    config = _mapping(run.get("config"))
    sizes = _mapping(run.get("sizes"))
    own = _mapping(run.get("task_sizes"))
    text = f"{config.get('dtype') or 'fp32'}, precision {config.get('precision') or 'strict'}"
    text += f", at {sizes_text(sizes)}" if sizes else ""
    differ = bool(own) and dict(own) != dict(sizes)
    sized_by = _sized_by(run, config)
    if sized_by == "shrink":
        text += ": shrunk for the Triton interpreter (no CUDA)"
        text += f" from the task's {sizes_text(own)}" if differ else ""
    elif sized_by == "shape":
        text += " (set with --shape" + (f"; the task's own: {sizes_text(own)})" if differ else ")")
    elif sizes:
        text += " (the task's own sizes)"
    if also_checked:
        text += f"; also checked at {sizes_text(also_checked)}"
    return text


# -- the verdict ----------------------------------------------------------------------------------


def statuses_text(counts: Mapping[str, int]) -> str:
    """'2 ok, 1 timeout': counts in the evaluator's order of statuses, others after."""
    order = [s for s in STATUSES if s in counts] + sorted(set(counts) - set(STATUSES))
    return ", ".join(f"{counts[s]} {s}" for s in order) or "none"


ROLE_ORDER = ("planner", "coder", "critic")


def role_order(roles: Iterable[str]) -> list[str]:
    """Roles in the loop's order (planner, coder, critic), whatever order run.json kept."""
    return sorted(roles, key=lambda r: (ROLE_ORDER.index(r) if r in ROLE_ORDER else 3, r))


def _fault(candidate: Mapping[str, Any]) -> str | None:
    if "fault" in candidate:  # the report's view of a candidate says it (None: no result)
        return candidate["fault"]
    return fault_of(str(candidate.get("status") or "pending"), candidate.get("rule"))


def verdict(run: Mapping[str, Any]) -> str:
    """The one verdict paragraph on a run, the CLI's and the report's: what came out (the best
    verified kernel and its speedups, or why the reference stays), why it stopped, what was judged
    (dtype, precision, sizes), the evaluator errors that were kernelwright's fault and no
    candidate's, and the configured models that answered nothing.

    `run` is run.json, or the run report's data (which adds the candidates found on disk, the best
    it found when run.json names none, and `judged` with the second shape checked). With no best
    named, the fastest verified candidate is told (a "No win" when it does not beat the reference).
    """
    candidates = [c for c in run.get("candidates") or [] if isinstance(c, Mapping)]
    best = run.get("best") if isinstance(run.get("best"), Mapping) else None
    if best is None:
        ok = [c for c in candidates if c.get("status") == "ok"]
        baseline = run_baseline(run)
        best = fastest(ok, lambda c: speedup_of(c, baseline))
    text = _outcome(run, best, candidates)
    if run.get("stop_reason") == "task-error":
        return text
    n = run.get("evaluator_errors")
    if n is None:
        n = sum(_fault(c) == "evaluator" for c in candidates)
    if n:
        text += (
            f" {n} evaluator error{'s' * (n != 1)} (kernelwright's fault, not the "
            f"candidate's: {'they were' if n != 1 else 'it was'} not judged)."
        )
    judged = run.get("judged") or judged_text(run)
    return f"{text} Judged in {judged}." + _llm_verdict(run)


def _outcome(
    run: Mapping[str, Any], best: Mapping[str, Any] | None, views: Sequence[Mapping[str, Any]]
) -> str:
    n_rounds = len(run.get("rounds") or [])
    n_ok = sum(v.get("status") == "ok" for v in views)
    counts = statuses_text(Counter(str(v.get("status") or "pending") for v in views))
    stop_reason, stop_detail = run.get("stop_reason"), run.get("stop_detail") or ""
    detail = f" ({stop_detail})" if stop_detail else ""
    stop = f" Stopped: {stop_reason}{detail}." if stop_reason else ""
    tried = f"{len(views)} candidates over {n_rounds} round{'s' * (n_rounds != 1)} ({counts})"
    if stop_reason == "task-error":
        return (
            f"Task error: the task's reference itself fails, so no candidate could be judged "
            f"({stop_detail})."
        )
    if not views:
        return f"No candidate was evaluated; the PyTorch reference stays.{stop}"
    if best is None:
        return f"No candidate passed verification: {tried}. Keep the PyTorch reference.{stop}"
    where = f"round {best.get('round')}, candidate {best.get('candidate')}"
    eager, compiled = finite(best.get("speedup_eager")), finite(best.get("speedup_compiled"))
    if eager is None:
        return (
            f"A verified kernel was found ({where}), but its speed is unknown: timings here are "
            f"not meaningful, so only correctness was checked. {n_ok} of {tried} were correct."
            f"{stop}"
        )
    roofline = finite(best.get("roofline_fraction"))
    roof = f", at {roofline:.0%} of the roofline" if roofline is not None else ""
    vs_compiled = f" and {compiled:.2f}x vs torch.compile" if compiled is not None else ""
    baseline = run_baseline(run)
    compile_wins = compiled is not None and not is_better(compiled, REFERENCE_SPEEDUP)
    if compile_wins and baseline != "eager" and compiled is not None and compiled > 0:
        return (
            f"No win: torch.compile is {1 / compiled:.2f}x faster than the best verified kernel "
            f"({where}, {eager:.2f}x PyTorch eager); use torch.compile. {n_ok} of {tried} were "
            f"correct.{stop}"
        )
    if not is_better(baseline_speedup(eager, compiled, baseline), REFERENCE_SPEEDUP):
        return (
            f"No win: the best verified kernel ({where}) runs at {eager:.2f}x of PyTorch eager"
            f"{vs_compiled}. Keep the PyTorch reference. {n_ok} of {tried} were correct.{stop}"
        )
    caveat = (
        " torch.compile is still faster: prefer it where it is available." if compile_wins else ""
    )
    return (
        f"The best verified kernel ({where}) is {eager:.2f}x faster than PyTorch eager"
        f"{vs_compiled}{roof}; it is saved as best.py. {n_ok} of {tried} were correct.{stop}"
        f"{caveat}"
    )


def run_baseline(run: Mapping[str, Any]) -> str:
    """The baseline a run judged its kernels against: its config's, else "eager" (a run from
    before --baseline, whose best was chosen against eager alone)."""
    value = _mapping(run.get("config")).get("baseline")
    return value if value in BASELINES else "eager"


def _llm_verdict(run: Mapping[str, Any]) -> str:
    """A sentence when a configured model answered nothing, or an endpoint was switched off."""
    unanswered = _mapping(run.get("llm_unanswered"))
    off = run.get("llm_switched_off") or []
    if unanswered:
        models = _mapping(run.get("models"))
        roles = role_order(unanswered)
        who = ", ".join(f"{role} ({models.get(role, '?')})" for role in roles)
        return (
            f" The configured model answered no call for {who}: those steps ran on the rules "
            f"and the fusion codegen. Last error: {unanswered[roles[0]]}"
        )
    if off:
        return f" An LLM endpoint was switched off mid-run: {off[0]['error']}"
    return ""


# -- who runs a run -------------------------------------------------------------------------------
# A run's status says "running" from the moment it starts until it finishes, waits for a person,
# or is interrupted; a process killed with SIGKILL (the OOM killer, `kill -9`, a lost machine)
# never gets to write anything else. run.json therefore names its owner (host, pid and the pid's
# start time, so that a recycled pid is not mistaken for it), and a reader on the same host that
# finds the owner gone reads the run as interrupted, which is what it is: resumable.
INTERRUPTED = "interrupted"


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux's /proc), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # after "pid (comm)": field 3 onwards
    return fields[19] if len(fields) > 19 else None  # field 22, starttime


def run_owner() -> dict[str, Any]:
    """run.json's owner: the process running the run now."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": _process_start(pid)}


def owner_gone(owner: Any) -> bool:
    """True when `owner` (run_owner() of some process) is known to have exited: it ran on this
    host and its pid is dead or now belongs to a later process. Another host's: not known."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    started = owner.get("started")
    return started is not None and _process_start(pid) not in (None, started)


def run_status(run: Mapping[str, Any]) -> str:
    """A run's status as it truly is: "interrupted" for a "running" run whose process is gone."""
    status = str(run.get("status") or "?")
    if status == "running" and owner_gone(run.get("owner")):
        return INTERRUPTED
    return status
