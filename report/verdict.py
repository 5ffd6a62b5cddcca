"""The verdict paragraph on a run, the CLI's and the report's, and the phrases it is made of:
what came out, why it stopped, what was judged (dtype, precision, sizes) and who failed.

Prose over decisions.py's rules (which kernel is best, what it must beat): this module words
them, it decides nothing of its own. Reads run.json as it is, or the run report's data.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..decisions import (
    REFERENCE_SPEEDUP,
    baseline_speedup,
    fastest,
    finite,
    is_better,
    run_baseline,
    speedup_of,
)
from ..sandbox.results import STATUSES, fault_of

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
