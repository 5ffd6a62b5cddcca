"""One run's report, from its record (run/record.py's RunRecord, which finalize hands over and
RunRecord.load reads from an older run's directory): report.md, report.json,
speedup_per_round.png and report.html in the run directory. What is best and the verdict are
decisions.py's; this module gathers and shows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..decisions import fastest, finite
from ..run.owner import run_status
from ..run.rundir import CANDIDATE_KEY, parse_candidate_key
from ..sandbox.results import EvalResult
from .format import (
    failures_text,
    md_table,
    memory_fields,
    num_text,
    pct_text,
    peaks,
    usage_text,
    usd_text,
    write_json,
    x_text,
)
from .html import badge, kernel_view, png_base64, render
from .plots import plot_rounds
from .verdict import judged_text, statuses_text, verdict

INTERPRETER_NOTE = (
    "Times are not meaningful: this run used the Triton interpreter (TRITON_INTERPRET=1, no GPU), "
    "which checks correctness only. Re-run on a CUDA GPU to measure speedups."
)


# What a report reads of a run: run/record.py's RunRecord and CandidateRecord have these (the
# record lives a floor below the report's callers, in run/, which the report does not import).
class CandidateFacts(Protocol):
    @property
    def round(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def key(self) -> str: ...  # round_NN/cand_K
    @property
    def kernel(self) -> str | None: ...
    @property
    def kernel_path(self) -> str | None: ...
    @property
    def result(self) -> EvalResult | None: ...
    @property
    def tuned(self) -> bool: ...
    @property
    def tuned_kernel(self) -> str | None: ...
    @property
    def tuned_path(self) -> str | None: ...
    @property
    def tuned_result(self) -> EvalResult | None: ...


class RunFacts(Protocol):
    @property
    def path(self) -> Path: ...
    @property
    def run_id(self) -> str: ...
    @property
    def run(self) -> Mapping[str, Any]: ...
    @property
    def rounds(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def candidate_rows(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def candidates(self) -> Sequence[CandidateFacts]: ...
    @property
    def plan_summaries(self) -> Mapping[int, str]: ...
    @property
    def events(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def best_py(self) -> str | None: ...


# A duplicate's summary names the candidate it repeats (agents/coder.py writes it).
_SAME_SOURCE = re.compile(rf"same source as ({CANDIDATE_KEY})")


def _candidate_view(cand: CandidateFacts) -> dict[str, Any]:
    seed = cand.result
    # The sweep's variant, when it beat the seed, is the candidate's verdict (run.json and the
    # best say so too): the tables must not show the seed's figures beside the tuned best.
    tuned = cand.tuned_result if cand.tuned else None
    result = tuned or seed
    summary = result.summary() if result else "no result.json (not evaluated yet)"
    if tuned is not None and seed is not None:
        summary += f" (tuned by the sweep; the seed: {x_text(finite(seed.speedup_eager))} vs eager)"
    view: dict[str, Any] = {
        "round": cand.round,
        "candidate": cand.index,
        "dir": cand.key,
        "kernel": cand.kernel_path,
        "tuned_kernel": cand.tuned_path if tuned is not None else None,
        "status": result.status if result else "pending",
        "rule": result.rule if result else None,
        "summary": summary,
        "speedup_eager": finite(result.speedup_eager) if result else None,
        "speedup_compiled": finite(result.speedup_compiled) if result else None,
        "roofline_fraction": finite(result.roofline.fraction)
        if result and result.roofline
        else None,
        "timings_meaningful": bool(result and result.timings and result.timings.meaningful),
        "interpreter": bool(result and result.environment.interpreter),
        "environment": dataclasses.asdict(result.environment) if result else None,
        "note": result.timings.note if result and result.timings else "",
        # Whose verdict it is: an evaluator error is kernelwright's, not the candidate's.
        "fault": result.fault if result else None,
        "shapes_checked": [dict(s) for s in result.correctness.shapes]
        if result and result.correctness
        else [],
        **(memory_fields(result) if result else {}),
    }
    return view


def _best_of(views: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The fastest ok candidate (decisions.fastest: the earliest wins a tie)."""
    return fastest([v for v in views if v["status"] == "ok"], lambda v: v["speedup_eager"])


def _plan_summary(
    record: RunFacts, round_no: int, from_run: Mapping[int, Mapping[str, Any]]
) -> str:
    summary = from_run.get(round_no, {}).get("plan_summary")
    if summary:
        return str(summary)
    return record.plan_summaries.get(round_no, "")  # the round's plan.json


def _round_rows(record: RunFacts, views: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    from_run = {r["round"]: r for r in record.rounds}
    numbers = sorted({v["round"] for v in views} | set(from_run))
    rows, best_so_far = [], None
    for n in numbers:
        in_round = [v for v in views if v["round"] == n]
        best = _best_of(in_round)
        eager = best["speedup_eager"] if best else None
        if eager is not None and (best_so_far is None or eager > best_so_far):
            best_so_far = eager
        rows.append(
            {
                "round": n,
                "candidates": len(in_round),
                "statuses": dict(Counter(v["status"] for v in in_round)),
                "best_candidate": best["candidate"] if best else None,
                "best_speedup_eager": eager,
                "best_speedup_compiled": best["speedup_compiled"] if best else None,
                "best_roofline_fraction": best["roofline_fraction"] if best else None,
                "best_so_far_eager": best_so_far,
                "plan_summary": _plan_summary(record, n, from_run),
            }
        )
    return rows


def _best_entry(
    run: Mapping[str, Any], views: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The run's best: what run.json names (the agents decided), else the fastest ok candidate."""
    named = run.get("best") if isinstance(run.get("best"), dict) else None
    view = None
    if named is not None:
        view = next(
            (
                v
                for v in views
                if v["round"] == named.get("round") and v["candidate"] == named.get("candidate")
            ),
            None,
        )
    else:
        view = _best_of(views)
        if view is None:
            return None
    named = named or {}
    view = view or {}
    return {
        "round": named.get("round", view.get("round")),
        "candidate": named.get("candidate", view.get("candidate")),
        "path": named.get("path") or view.get("kernel"),
        "speedup_eager": finite(named.get("speedup_eager", view.get("speedup_eager"))),
        "speedup_compiled": finite(named.get("speedup_compiled", view.get("speedup_compiled"))),
        "roofline_fraction": finite(named.get("roofline_fraction", view.get("roofline_fraction"))),
    }


def _parse_ts(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _events_summary(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    stamps = [t for t in (_parse_ts(e.get("ts")) for e in events) if t is not None]
    return {
        "events": len(events),
        "duration_s": max(stamps) - min(stamps) if len(stamps) >= 2 else None,
        "by_kind": dict(Counter(str(e.get("event", "?")) for e in events)),
    }


def _listed_candidates(record: RunFacts) -> dict[tuple[int, int], Mapping[str, Any]]:
    """run.json's candidate rows (the agents' view: origin, idea, duplicates), by position."""
    return {(r["round"], r["candidate"]): r for r in record.candidate_rows}


def _unlisted_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate run.json lists with no directory on disk (skipped as a duplicate, say)."""
    return {
        "round": row["round"],
        "candidate": row["candidate"],
        "dir": None,
        "kernel": None,
        "tuned_kernel": None,
        "status": str(row.get("status") or "pending"),
        "rule": row.get("rule"),
        "summary": str(row.get("summary") or ""),
        "speedup_eager": finite(row.get("speedup_eager")),
        "speedup_compiled": finite(row.get("speedup_compiled")),
        "roofline_fraction": finite(row.get("roofline_fraction")),
        "timings_meaningful": False,
        "interpreter": False,
        "environment": None,
        "note": "",
        "fault": None,
        "shapes_checked": [],
    }


def _skipped_events(
    events: Sequence[Mapping[str, Any]],
) -> dict[tuple[int, int], Mapping[str, Any]]:
    """Candidates the coder set aside without evaluation (a duplicate), from events.jsonl: what
    a run killed before its finalize (which writes run.json's candidates) still says of them."""
    found: dict[tuple[int, int], Mapping[str, Any]] = {}
    for event in events:
        if event.get("event") != "candidate.skipped":
            continue
        if isinstance(event.get("round"), int) and isinstance(event.get("index"), int):
            found[(event["round"], event["index"])] = event
    return found


def _duplicate_of(row: Mapping[str, Any]) -> str | None:
    """'round_01/cand_1' for a duplicate, from run.json's row or a candidate.skipped event."""
    if row.get("duplicate_of"):
        return str(row["duplicate_of"])
    match = _SAME_SOURCE.match(str(row.get("summary") or ""))
    return match.group(1) if match else None


def _as_duplicate(view: dict[str, Any], of: str, views: Mapping[tuple[int, int], Any]) -> None:
    """A duplicate shows the candidate it repeats and that candidate's verdict, not "pending"."""
    key = parse_candidate_key(of)
    earlier = views.get(key) if key else None
    verdict = f": {earlier['summary']}" if earlier else ""
    view.update(
        status="duplicate",
        rule=earlier["rule"] if earlier else None,
        summary=f"duplicate of {of} (the same source; not evaluated again){verdict}",
        duplicate_of=of,
    )


def _all_candidates(record: RunFacts) -> list[dict[str, Any]]:
    views = {(c.round, c.index): _candidate_view(c) for c in record.candidates}
    listed = _listed_candidates(record)
    skipped = _skipped_events(record.events)
    for key, row in listed.items():
        views.setdefault(key, _unlisted_view(row))
    for key, view in views.items():
        row = listed.get(key, {})
        view["origin"] = row.get("origin")
        view["idea"] = row.get("idea")
    for key, view in views.items():
        said = listed.get(key) or skipped.get(key) or {}
        of = _duplicate_of(said) if said.get("status") == "duplicate" else None
        if of and view["status"] in ("pending", "duplicate"):
            _as_duplicate(view, of, views)
    return [views[k] for k in sorted(views)]


def _timing_note(run: Mapping[str, Any], views: Sequence[Mapping[str, Any]]) -> str | None:
    """Why times are not meaningful, or None when they are. run.json's word (the agents knew
    whether CUDA was there) is taken first; otherwise the results say it."""
    env = run.get("environment")
    env = env if isinstance(env, Mapping) else {}
    if "timing_meaningful" in run:
        meaningful = bool(run["timing_meaningful"])
    else:
        ok = [v for v in views if v["status"] == "ok"]
        interpreted = bool(env.get("interpreter")) or any(v["interpreter"] for v in views)
        meaningful = not interpreted and (not ok or any(v["timings_meaningful"] for v in ok))
    if meaningful:
        return None
    detail = run.get("verdict_note") or next((v["note"] for v in views if v["note"]), "")
    news = _news(detail)
    return INTERPRETER_NOTE + (f" ({news})" if news else "")


def _news(detail: str) -> str:
    """What a note adds to INTERPRETER_NOTE: finalize's "Times are not meaningful: no CUDA
    here, ... (correctness only); best is the first verified candidate." says it again."""
    clauses = [c.strip() for c in re.split(r";\s+", detail) if c.strip()]
    said = ("not meaningful", "correctness only")
    return "; ".join(c for c in clauses if not any(w in c.lower() for w in said))


def run_report_data(record: RunFacts) -> dict[str, Any]:
    """Everything a run report shows, from the run's record (what report.json holds)."""
    run = record.run
    views = _all_candidates(record)
    environment = run.get("environment")
    if not isinstance(environment, Mapping) or not environment:
        environment = next((v["environment"] for v in views if v["environment"]), {})
    note = _timing_note(run, views)
    data: dict[str, Any] = {
        "kind": "run",
        "run_id": record.run_id,
        "task": str(run.get("task") or ""),
        "task_name": str(run.get("task_name") or ""),
        "task_hash": str(run.get("task_hash") or ""),
        "created": str(run.get("created") or ""),
        "finished": run.get("finished"),
        "status": run_status(run),
        "stop_reason": run.get("stop_reason"),
        "stop_detail": run.get("stop_detail") or "",
        "models": run.get("models") or {},
        "config": run.get("config") or {},
        "environment": dict(environment),
        "timings_meaningful": note is None,
        "timing_note": note,
        "usage": run.get("usage") or {},
        "llm_unanswered": run.get("llm_unanswered") or {},
        "llm_switched_off": run.get("llm_switched_off") or [],
        "rounds": _round_rows(record, views),
        "candidates": views,
        "best": _best_entry(run, views),
        "log": _events_summary(record.events),
    }
    data["judged"] = judged_text(run, _other_shape(data))
    data["evaluator_errors"] = sum(v["fault"] == "evaluator" for v in views)
    data["verdict"] = verdict(data)
    return data


def _other_shape(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The second shape a verified candidate (the best first) was also checked at, if any."""
    best = data["best"] or {}
    views = sorted(
        (v for v in data["candidates"] if v["status"] == "ok"),
        key=lambda v: (v["round"], v["candidate"]) != (best.get("round"), best.get("candidate")),
    )
    for v in views:
        if len(v["shapes_checked"]) > 1:
            return v["shapes_checked"][1]
    return None


def _environment_text(env: Mapping[str, Any]) -> str:
    if not env:
        return "unknown"
    device = env.get("gpu") or env.get("device") or ("cpu" if env.get("interpreter") else "?")
    parts = [str(device)]
    for key in ("torch", "triton", "cuda", "driver"):
        if isinstance(env.get(key), str) and env[key]:  # agents write cuda as a bool
            parts.append(f"{key} {env[key]}")
    if env.get("interpreter"):
        parts.append("Triton interpreter")
    return ", ".join(parts)


def _facts(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    models = ", ".join(f"{k}: {v}" for k, v in data["models"].items() if v) or "none (rules)"
    duration = data["log"]["duration_s"]
    stop = data["stop_reason"] or "–"
    if data["stop_detail"]:
        stop += f" ({data['stop_detail']})"
    return [
        ("Task", f"{data['task_name'] or data['task']} ({data['task']}, {data['task_hash'][:12]})"),
        ("Judged", data["judged"]),
        ("Run", f"{data['run_id']}, created {data['created'] or '?'}"),
        ("Status", f"{data['status'] or '?'}; stop reason: {stop}"),
        ("Models", models),
        ("Environment", _environment_text(data["environment"])),
        ("Usage", usage_text(data["usage"])),
        ("Duration", f"{duration:.0f} s" if duration is not None else "–"),
    ]


_ROUND_HEADERS = (
    "Round",
    "Candidates",
    "Statuses",
    "Best vs eager",
    "Best vs torch.compile",
    "Roofline",
    "Best so far",
    "Plan",
)


_CAND_HEADERS = (
    "Round",
    "Cand",
    "Idea",
    "Status",
    "Rule",
    "vs eager",
    "vs torch.compile",
    "Peak memory (candidate / reference)",
    "Summary",
)


_AGENT_HEADERS = (
    "Agent",
    "Model",
    "Calls made",
    "Answered",
    "Failed (why)",
    "Not sent",
    "Retries",
    "Prompt tokens",
    "Completion tokens",
    "Cost",
    "Last error",
)


def _round_cells(r: Mapping[str, Any]) -> list[Any]:
    return [
        r["round"],
        r["candidates"],
        statuses_text(r["statuses"]),
        x_text(r["best_speedup_eager"]),
        x_text(r["best_speedup_compiled"]),
        pct_text(r["best_roofline_fraction"]),
        x_text(r["best_so_far_eager"]),
        r["plan_summary"] or "–",
    ]


def _cand_cells(v: Mapping[str, Any], status: Any) -> list[Any]:
    return [
        v["round"],
        v["candidate"],
        v.get("idea") or v.get("origin") or "–",
        status,
        v["rule"] or "–",
        x_text(v["speedup_eager"]),
        x_text(v["speedup_compiled"]),
        peaks(v.get("candidate_peak_bytes"), v.get("reference_peak_bytes")),
        v["summary"],
    ]


def _agent_rows(usage: Mapping[str, Any], models: Mapping[str, Any]) -> list[list[str]]:
    """One row per agent that called, or had a model and made no call."""
    per_agent = {k: v for k, v in (usage.get("per_agent") or {}).items() if isinstance(v, Mapping)}
    online = [role for role, model in models.items() if model and model != "offline"]
    rows = []
    for name in sorted({*per_agent, *online}):
        u = per_agent.get(name, {})
        answered, failed = u.get("calls", 0), u.get("failed_calls", 0)
        detail = [f"{num_text(u['cached_calls'])} cached"] if u.get("cached_calls") else []
        if u.get("unusable"):
            detail.append(f"{num_text(u['unusable'])} unusable")
        rows.append(
            [
                name,
                str(models.get(name) or "–"),
                num_text(answered + failed),
                num_text(answered) + (f" ({', '.join(detail)})" if detail else ""),
                f"{num_text(failed)} ({failures_text(u)})" if failed else "0",
                num_text(u.get("refused_calls", 0)),
                num_text(u.get("retries", 0)),
                num_text(u.get("prompt_tokens", 0)),
                num_text(u.get("completion_tokens", 0)),
                usd_text(u.get("cost_usd")),
                (u.get("last_error") or "–")[:200] if failed or u.get("refused_calls") else "–",
            ]
        )
    return rows


def _run_markdown(data: Mapping[str, Any], plot: Path | None) -> str:
    parts = [
        f"# kernelwright run {data['run_id']}: {data['task_name'] or data['task']}",
        data["verdict"],
    ]
    if data["timing_note"]:
        parts.append(f"> **Note.** {data['timing_note']}")
    parts.append(md_table(("", ""), _facts(data)))
    parts.append("## Rounds")
    parts.append(md_table(_ROUND_HEADERS, [_round_cells(r) for r in data["rounds"]]))
    if plot is not None:
        parts.append(f"![Best speedup per round]({plot.name})")
    parts.append("## Candidates")
    parts.append(md_table(_CAND_HEADERS, [_cand_cells(v, v["status"]) for v in data["candidates"]]))
    agents = _agent_rows(data["usage"], data["models"])
    if agents:
        parts += ["## LLM calls per agent", md_table(_AGENT_HEADERS, agents)]
    return "\n\n".join(parts) + "\n"


def _run_kernels(record: RunFacts, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks = []
    if record.best_py is not None:
        blocks.append(kernel_view("best.py", record.best_py, "ok", open_=True))
    cands = {(c.round, c.index): c for c in record.candidates}
    for v in data["candidates"]:
        cand = cands.get((v["round"], v["candidate"]))
        for key, source in (
            ("kernel", cand.kernel if cand else None),
            ("tuned_kernel", cand.tuned_kernel if cand else None),
        ):
            if v.get(key) and source is not None:
                blocks.append(kernel_view(v[key], source, v["status"]))
    return blocks


def _run_html(record: RunFacts, data: Mapping[str, Any], plot: Path | None) -> str:
    return render(
        "run.html.j2",
        title=f"kernelwright run {data['run_id']}: {data['task_name'] or data['task']}",
        verdict=data["verdict"],
        note=data["timing_note"],
        png=png_base64(plot) if plot is not None else None,
        facts=_facts(data),
        round_headers=_ROUND_HEADERS,
        rounds=[_round_cells(r) for r in data["rounds"]],
        candidate_headers=_CAND_HEADERS,
        candidates=[_cand_cells(v, badge(v["status"])) for v in data["candidates"]],
        agent_headers=_AGENT_HEADERS,
        agents=_agent_rows(data["usage"], data["models"]),
        kernels=_run_kernels(record, data),
    )


def write_run_report(record: RunFacts) -> dict[str, Path]:
    """Write report.md, report.json, speedup_per_round.png and report.html into the run dir."""
    run_dir = record.path
    data = run_report_data(record)
    # The chart only where there are times: on CPU it is empty axes at the top of the page.
    png = run_dir / "speedup_per_round.png"
    timed = any(
        r["best_speedup_eager"] is not None or r["best_speedup_compiled"] is not None
        for r in data["rounds"]
    )
    if timed:
        plot_rounds(data["rounds"], png)
    else:
        png.unlink(missing_ok=True)  # an earlier report's, of the same untimed run
    plot = png if timed else None
    md = run_dir / "report.md"
    md.write_text(_run_markdown(data, plot))
    page = run_dir / "report.html"
    page.write_text(_run_html(record, data, plot))
    return {
        "markdown": md,
        "json": write_json(run_dir / "report.json", data),
        **({"plot": plot} if plot is not None else {}),
        "html": page,
    }
