"""Nightly reports: per task (and variant, and GPU) the latest run against the one before it,
judged by decisions.night_verdict, and nightly.md/.json/.html with the trend plot."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..decisions import NIGHTLY_SLOWDOWN, finite, measured, night_verdict
from .format import as_mapping, md_table, ms_text, series_key, series_name, write_json, x_text
from .html import Markup, badge, png_base64, render
from .plots import plot_nightly


def nightly_changes(
    history: Iterable[Any], slowdown: float = NIGHTLY_SLOWDOWN
) -> list[dict[str, Any]]:
    """Per task (and variant, and GPU): the latest nightly run against the one before it, with
    a verdict. The one before is the latest earlier run that measured the kernel, whatever its
    date (a second run on one night compares with the first); an evaluator error measured
    nothing, so it is never the one compared with.

    A regression is a kernel that is no longer ok (incorrect, failing to compile, crashing...) or
    that got slower by more than `slowdown`. An evaluator error (kernelwright's fault) and a task
    error (the reference itself fails) are not the kernel's: they are flagged apart. The nightly
    command exits non-zero on any of the three.
    """
    series: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in map(as_mapping, history):
        series.setdefault(series_key(row), []).append(row)
    changes = []
    for rows in series.values():
        rows = sorted(rows, key=lambda h: (h["night"], str(h.get("recorded") or "")))
        latest = rows[-1]
        previous = next((h for h in reversed(rows[:-1]) if measured(h)), None)
        judged = night_verdict(latest, previous, slowdown)
        changes.append(
            {
                "task": series_name(latest),
                "task_hash": latest.get("task_hash"),
                "variant": latest.get("variant") or "fp32",
                "env_key": latest.get("env_key"),
                "gpu": series_key(latest)[2],
                "night": latest["night"],
                "status": latest["status"],
                "rule": latest.get("rule"),
                "speedup_eager": finite(latest.get("speedup_eager")),
                "candidate_ms": finite(latest.get("candidate_ms")),
                "previous_night": previous["night"] if previous else None,
                "previous_recorded": previous.get("recorded") if previous else None,
                "previous_status": previous["status"] if previous else None,
                "previous_speedup_eager": finite(previous.get("speedup_eager"))
                if previous
                else None,
                "previous_candidate_ms": finite(previous.get("candidate_ms")) if previous else None,
                **judged,
            }
        )
    return sorted(changes, key=lambda c: (not c["reason"], c["task"]))


_NIGHT_HEADERS = (
    "Task",
    "GPU",
    "Night",
    "Status",
    "vs eager",
    "Kernel time",
    "Previous",
    "Previous vs eager",
    "Change",
    "Verdict",
)


def _previous_text(c: Mapping[str, Any]) -> str:
    """The run compared with: its night, and its time when it ran the same night."""
    if not c["previous_night"]:
        return "–"
    if c["previous_night"] == c["night"] and c.get("previous_recorded"):
        return f"{c['previous_night']} (earlier run, {str(c['previous_recorded'])[11:16]} UTC)"
    return str(c["previous_night"])


def _night_cells(c: Mapping[str, Any], html_: bool) -> list[Any]:
    verdict: Any = c["reason"] or "ok"
    if html_ and c["reason"]:
        verdict = Markup('<span class="regression">{}</span>').format(c["reason"])
    change = c["slowdown"]
    return [
        c["task"],
        c["gpu"],
        c["night"],
        badge(c["status"]) if html_ else c["status"],
        x_text(c["speedup_eager"]),
        ms_text(c["candidate_ms"]),
        _previous_text(c),
        x_text(c["previous_speedup_eager"]),
        f"{change:+.1%} time" if change is not None else "–",
        verdict,
    ]


_REVERT_HEADERS = ("Task", "Variant", "Environment", "From", "To", "Why", "Restored, tonight")


def _revert_cells(r: Mapping[str, Any]) -> list[Any]:
    return [
        r["task"],
        r["variant"],
        r["env_key"],
        f"v{r['from_version']}",
        f"v{r['to_version']}",
        r["reason"],
        r.get("restored") or "–",
    ]


def write_nightly_report(
    history: Iterable[Any],
    out_dir: str | Path,
    slowdown: float = NIGHTLY_SLOWDOWN,
    title: str = "kernelwright nightly",
    reverts: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Path]:
    """Write nightly.md, nightly.json, nightly_trend.png and nightly.html into `out_dir`;
    `reverts` are the versions taken back tonight (nightly --revert-on-regression)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [dict(as_mapping(h)) for h in history]
    changes = nightly_changes(rows, slowdown)
    regressions = [c for c in changes if c["regression"]]
    evaluator_errors = [c for c in changes if c["evaluator_error"]]
    task_errors = [c for c in changes if c["task_error"]]
    plot = plot_nightly(rows, out / "nightly_trend.png")
    latest = max((c["night"] for c in changes), default="–")
    headline = (
        f"{len(regressions)} regression{'s' * (len(regressions) != 1)} among {len(changes)} "
        f"kernel{'s' * (len(changes) != 1)}, night {latest} (a regression: no longer ok, or "
        f"more than {slowdown:.0%} slower than the run before)."
    )
    if evaluator_errors:
        headline += (
            f" {len(evaluator_errors)} evaluator error(s): kernelwright failed, so those kernels "
            "were not measured (not counted as regressions)."
        )
    if task_errors:
        headline += f" {len(task_errors)} task error(s): the reference itself fails."
    reverted = ""
    if reverts:
        tasks = len({(r["task"], r["variant"], r["env_key"]) for r in reverts})
        headline += f" {tasks} task(s) reverted to a previous kernel version (below)."
        rows = [_revert_cells(r) for r in reverts]
        reverted = f"## Reverted\n\n{md_table(_REVERT_HEADERS, rows)}\n\n"
    md = out / "nightly.md"
    md.write_text(
        f"# {title}\n\n{headline}\n\n"
        f"{md_table(_NIGHT_HEADERS, [_night_cells(c, False) for c in changes])}\n\n"
        f"{reverted}![Night over night]({plot.name})\n"
    )
    page = out / "nightly.html"
    page.write_text(
        render(
            "nightly.html.j2",
            title=title,
            headline=headline,
            png=png_base64(plot),
            night_headers=_NIGHT_HEADERS,
            changes=[_night_cells(c, True) for c in changes],
            revert_headers=_REVERT_HEADERS,
            reverts=[_revert_cells(r) for r in reverts],
        )
    )
    return {
        "markdown": md,
        "json": write_json(
            out / "nightly.json",
            {
                "regressions": len(regressions),
                "evaluator_errors": len(evaluator_errors),
                "task_errors": len(task_errors),
                "changes": changes,
                "reverts": [dict(r) for r in reverts],
                "history": rows,
            },
        ),
        "plot": plot,
        "html": page,
    }
