"""The graph's last node: best.py (a verified candidate that beat the reference) and the final
run.json, then the run's record (run/record.py), built once and handed to the run report and
to the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..decisions import fastest
from ..run.record import CandidateRecord, RunRecord, plan_summaries
from ..run.records import sync_record
from ..run.rundir import RunDir, best_py_text, now_iso
from .state import Candidate, RunState, Usage, best_candidate, round_summaries

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    from .context import RunContext


def unanswered_roles(usage: Usage, models: dict[str, str]) -> dict[str, str]:
    """{role: last error} for each role with a model whose calls all failed or were refused:
    the run was meant to use it and did not (exit 3 unless --fallback-offline)."""
    out = {}
    for role, model in models.items():
        u = usage.per_agent.get(role)
        if model == "offline" or u is None or u.calls or not (u.failed_calls or u.refused_calls):
            continue
        out[role] = u.last_error or "its calls were not sent: the endpoint was switched off"
    return out


def best_block(best: Candidate | None, rel_path: str | None) -> dict[str, Any] | None:
    """run.json's best: where the winner is and what it achieved."""
    if best is None:
        return None
    return {
        "round": best.round,
        "candidate": best.index,
        "path": rel_path,
        "origin": best.origin,
        "tuned": best.tuned,
        "speedup_eager": best.speedup_eager,
        "speedup_compiled": best.speedup_compiled,
        "roofline_fraction": best.roofline_fraction,
        "summary": best.summary,
    }


def candidate_rows(candidates: list[Candidate]) -> list[dict[str, Any]]:
    """run.json's candidates: one row per candidate of every round, for reports."""
    return [
        {
            "round": c.round,
            "candidate": c.index,
            "origin": c.origin,
            "idea": c.idea,
            "status": c.status,
            "rule": c.rule,
            "summary": c.summary,
            "speedup_eager": c.speedup_eager,
            "speedup_compiled": c.speedup_compiled,
            "roofline_fraction": c.roofline_fraction,
            "followup": c.followup,
            "duplicate_of": c.duplicate_of,
        }
        for c in sorted(candidates, key=lambda c: (c.round, c.index))
    ]


def write_report(rundir: RunDir, record: RunRecord) -> str | None:
    """report.run.write_run_report(record); the error text if it fails."""
    from ..report.run import write_run_report

    try:
        write_run_report(record)
    except Exception as e:  # the run's results are on disk already; a report bug must not lose them
        rundir.event("report.error", error=f"{type(e).__name__}: {e}")
        return f"{type(e).__name__}: {e}"
    return None


def store_record(ctx: RunContext, record: RunRecord) -> None:
    """records.sync_record into the run's store, when it has one: the run's one sync. A store
    that fails is the event's to say (the run's files are written): the graph's driver syncs
    the run once more from its directory after the graph ends, and that failure is raised."""
    if ctx.store is None:
        return
    try:
        sync_record(ctx.store, record)
    except Exception as e:
        ctx.store_error = f"{type(e).__name__}: {e}"
        ctx.rundir.event("store.error", error=ctx.store_error)


def judged_records(candidates: list[Candidate]) -> dict[tuple[int, int], CandidateRecord]:
    """The candidates the tester judged in this run, as the run's record holds them, from the
    state (their verdicts are in it, typed): what their directories hold, without reading them
    back. A duplicate (its verdict is its original's, its directory has none) and a candidate
    that was never judged are left to the record to read; so is a tuned candidate of a
    checkpoint older than the state's seed verdict."""
    known = {}
    for c in candidates:
        if c.eval_finished is None or c.duplicate_of is not None or c.result is None:
            continue
        tuned = c.tuned_source is not None
        if tuned and c.seed_result is None:
            continue
        known[(c.round, c.index)] = CandidateRecord(
            round=c.round,
            index=c.index,
            kernel=c.source,
            result=c.seed_result if tuned else c.result,
            tuned_kernel=c.tuned_source,
            tuned_result=c.result if tuned else None,
        )
    return known


def finalize(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Node: best.py (only a verified candidate that beat the reference) and the final run.json."""
    ctx = runtime.context
    rd = ctx.rundir
    meaningful = (state.get("profile") or {}).get("timing_meaningful", False)
    candidates = state.get("candidates", [])
    best = best_candidate(candidates, timing_meaningful=meaningful, baseline=ctx.config.baseline)
    best_path = None
    if best is not None:
        best_path = rd.write_best(best.final_source or "")
    else:  # never leave a stale winner from an earlier attempt
        rd.remove_best()
    note = (
        "Times are not meaningful: no CUDA here, candidates ran under the Triton interpreter "
        "(correctness only); best is the first verified candidate."
        if not meaningful
        else ""
    )
    usage = state.get("usage") or Usage()
    breakers = [
        {"endpoint": e.endpoint, "model": e.model, "error": str(e.open_error)}
        for e in ctx.endpoints.states()
        if e.open_error is not None
    ]
    written = rd.update_run(
        status="done",
        llm_unanswered=unanswered_roles(usage, ctx.models()),
        llm_switched_off=breakers,
        finished=now_iso(),
        stop_reason=state.get("stop_reason"),
        stop_detail=state.get("stop_detail", ""),
        best=best_block(best, best_path),
        verdict_note=note or None,
        timing_meaningful=meaningful,
        usage=usage.to_dict(),
        rounds=round_summaries(state.get("plans", []), candidates),
        candidates=candidate_rows(candidates),
        elapsed_s=round(state.get("elapsed_s", 0.0), 3),
    )
    # With no winner, the progress line still names the fastest verified kernel and its verdict.
    # "Fastest" by the run's own baseline, the one that kept it from winning.
    quickest = None
    baseline = ctx.config.baseline
    if best is None and meaningful:
        timed = [c for c in candidates if c.status == "ok" and c.speedup_over(baseline) is not None]
        quickest = fastest(timed, lambda c: c.speedup_over(baseline))
    shown = best or quickest
    rd.event(
        "finalize",
        best=best.key if best else None,
        fastest=quickest.key if quickest else None,
        baseline=baseline,
        summary=shown.summary if shown else None,
        stop_reason=state.get("stop_reason"),
    )
    # One record of the run, for the report and the store alike.
    record = RunRecord.of(
        rd,
        written,
        plan_summaries=plan_summaries([p.summary for p in state.get("plans", [])]),
        best_py=best_py_text(best.final_source or "") if best is not None else None,
        known=judged_records(candidates),
    )
    report_error = write_report(rd, record)
    store_record(ctx, record)
    if report_error:
        rd.update_run(report_error=report_error)
    return {}
