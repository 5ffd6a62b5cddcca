"""Suite reports: a row per task, KernelBench's metrics (fast_p from decisions.py, geometric
means, per level), and suite.md/.json/.html with the per-task speedup plot."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..decisions import REFERENCE_SPEEDUP, fast_p_summary, finite, is_better, speedup_of
from ..sandbox.results import EvalResult
from .format import md_table, memory_fields, pct_text, peaks, short_note, write_json, x_text
from .html import badge, kernel_view, png_base64, render
from .plots import plot_suite


def suite_row(task: str, result: EvalResult | None) -> dict[str, Any]:
    """A suite row from a task's final verdict (None: the task was never evaluated)."""
    if result is None:
        return {"task": task, "status": "pending", "correct": False, "rule": None}
    return {
        "task": task,
        "status": result.status,
        "rule": result.rule,
        "correct": result.ok,
        "speedup_eager": finite(result.speedup_eager),
        "speedup_compiled": finite(result.speedup_compiled),
        "roofline_fraction": finite(result.roofline.fraction) if result.roofline else None,
        "limiter": result.roofline.limiter if result.roofline else None,
        # The GPU model and versions its times come from (Environment.key): speedups of two
        # environments are never compared as one, so the report groups tasks by it.
        "environment": result.environment.key,
        **memory_fields(result),
    }


def normal_row(row: Mapping[str, Any]) -> dict[str, Any]:
    correct = bool(row.get("correct", row.get("status") == "ok"))
    return {
        "task": str(row.get("task", "?")),
        "status": str(row.get("status") or ("ok" if correct else "incorrect")),
        "rule": row.get("rule"),
        "correct": correct,
        "speedup_eager": finite(row.get("speedup_eager")),
        "speedup_compiled": finite(row.get("speedup_compiled")),
        "roofline_fraction": finite(row.get("roofline_fraction")),
        "limiter": row.get("limiter"),  # what bounds the roofline: "memory" or "compute"
        "tuned": row.get("tuned"),  # the `# tune:` sweep changed the kernel's constants
        "note": row.get("note"),  # why there is no candidate, or what its verdict said
        "kernel": row.get("kernel"),
        # Verdicts that were kernelwright's fault, not a candidate's (EvalResult.fault).
        "evaluator_errors": int(row.get("evaluator_errors") or 0),
        "candidate_peak_bytes": row.get("candidate_peak_bytes"),
        "reference_peak_bytes": row.get("reference_peak_bytes"),
        "environment": row.get("environment") or "",
        # Where its candidates ran on a cluster ("node GPU 3"); empty on the local pool.
        "ran_on": list(row.get("ran_on") or []),
    }


def geomean(values: Iterable[float | None]) -> float | None:
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def suite_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """KernelBench metrics over per-task rows (task, correct, speedup_eager, speedup_compiled).

    fast_p: the fraction of *all* tasks that are correct and more than p times faster than the
    baseline (KernelBench's definition, strict >); geometric means over correct, timed tasks.
    """
    normal = [normal_row(r) for r in rows]
    levels: dict[str, list[dict[str, Any]]] = {}
    environments: dict[str, list[dict[str, Any]]] = {}
    for r in normal:
        if "/" in r["task"]:  # KernelBench's layout: "level1/01_relu"
            levels.setdefault(r["task"].split("/", 1)[0], []).append(r)
        if r["environment"]:
            environments.setdefault(r["environment"], []).append(r)
    whole = _level_summary(normal)  # tasks, correct and geometric means, as for each level
    return {
        "levels": {name: _level_summary(group) for name, group in sorted(levels.items())},
        # Per GPU model and versions (a mixed cluster): each one's own geometric means.
        "environments": {key: _level_summary(group) for key, group in sorted(environments.items())},
        **whole,
        "correctness_rate": whole["correct"] / len(normal) if normal else None,
        "fast_p": fast_p_summary(normal),
        "timed": sum(r["correct"] and r["speedup_eager"] is not None for r in normal),
        "evaluator_errors": sum(r["evaluator_errors"] for r in normal),
        "tasks_with_evaluator_errors": sum(r["evaluator_errors"] > 0 for r in normal),
        "task_errors": sum(r["status"] == "task-error" for r in normal),
    }


def _level_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts and geometric means of a set of rows: the whole suite, or one level (KernelBench
    reports its levels apart)."""
    correct = [r for r in rows if r["correct"]]
    fastest = [s for s in (speedup_of(r) for r in correct) if s is not None]
    return {
        "tasks": len(rows),
        "correct": len(correct),
        "geomean_speedup_eager": geomean(r["speedup_eager"] for r in correct),
        "geomean_speedup_compiled": geomean(r["speedup_compiled"] for r in correct),
        # Against the faster of the two per task (decisions.baseline_speedup), every verified
        # kernel; and as shipped: a run writes best.py only for a kernel faster than its baseline
        # (decisions.winner), so a slower one leaves the task at PyTorch's own time, 1.00x.
        "geomean_speedup_fastest": geomean(fastest),
        "shipped": sum(is_better(s, REFERENCE_SPEEDUP) for s in fastest),
        "geomean_shipped": geomean(
            s if is_better(s, REFERENCE_SPEEDUP) else REFERENCE_SPEEDUP for s in fastest
        ),
    }


def _level_text(level: Mapping[str, Any]) -> str:
    """'44 tasks, 40 correct, geomean 1.38x vs eager, 1.05x vs torch.compile'."""
    tasks = f"{level['tasks']} task{'s' * (level['tasks'] != 1)}"
    return (
        f"{tasks}, {level['correct']} correct, geomean "
        f"{x_text(level['geomean_speedup_eager'])} vs eager, "
        f"{x_text(level['geomean_speedup_compiled'])} vs torch.compile"
    )


def level_line(name: str, level: Mapping[str, Any]) -> str:
    """'level1: 44 tasks, 40 correct, ...': one level's line in the suite's summary."""
    return f"{name}: {_level_text(level)}"


def _summary_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    rows = [
        ["Tasks", str(summary["tasks"])],
        ["Correct", f"{summary['correct']} ({pct_text(summary['correctness_rate'])})"],
    ]
    for baseline, label in (("eager", "eager"), ("compiled", "torch.compile")):
        fast = summary["fast_p"][baseline]
        rows.append(
            [f"fast_p vs {label}", ", ".join(f"fast_{p}: {pct_text(v)}" for p, v in fast.items())]
        )
    rows.append(["Geomean speedup vs eager", x_text(summary["geomean_speedup_eager"])])
    rows.append(["Geomean speedup vs torch.compile", x_text(summary["geomean_speedup_compiled"])])
    rows.append(
        [
            "Geomean speedup vs the faster of the two (each task's)",
            x_text(summary["geomean_speedup_fastest"]),
        ]
    )
    rows.append(
        [
            "Shipped: faster than the faster baseline (the rest stay PyTorch, 1.00x)",
            f"{summary['shipped']} task(s); geomean as shipped "
            + x_text(summary["geomean_shipped"]),
        ]
    )
    rows.append(["Correct tasks with timings", str(summary["timed"])])
    rows.append(
        [
            "Evaluator errors (kernelwright's, not the candidates')",
            f"{summary['evaluator_errors']} in {summary['tasks_with_evaluator_errors']} task(s)",
        ]
    )
    rows.append(["Task errors (the reference itself fails)", str(summary["task_errors"])])
    for name, level in summary.get("levels", {}).items():
        rows.append([f"By level: {name}", _level_text(level)])
    if len(summary.get("environments", {})) > 1:
        for key, group in summary["environments"].items():
            rows.append([f"On {key}", _level_text(group)])
    return rows


_GPU_HEADERS = ("GPU and versions", "Where (node, GPU)", "Tasks")


def _gpu_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Which GPUs ran which task: one row per environment (GPU model and versions)."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["environment"]:
            grouped.setdefault(r["environment"], []).append(r)
    out = []
    for key, group in sorted(grouped.items()):
        places = sorted({p for r in group for p in r["ran_on"]})
        out.append([key, ", ".join(places) or "this machine", ", ".join(r["task"] for r in group)])
    return out


_TASK_HEADERS = (
    "Task",
    "Status",
    "Correct",
    "vs eager",
    "vs torch.compile",
    "Roofline",
    "Bound by",
    "Tuned",
    "Peak memory (candidate / reference)",
    "Evaluator errors",
    "Note",
)


def _task_cells(r: Mapping[str, Any], status: Any) -> list[Any]:
    return [
        r["task"],
        status,
        "yes" if r["correct"] else "no",
        x_text(r["speedup_eager"]),
        x_text(r["speedup_compiled"]),
        pct_text(r["roofline_fraction"]),
        r["limiter"] or "–",
        "–" if r["tuned"] is None else ("yes" if r["tuned"] else "no"),
        peaks(r.get("candidate_peak_bytes"), r.get("reference_peak_bytes")),
        r["evaluator_errors"],
        short_note(r["note"]),
    ]


UNTIMED_NOTE = (
    "Times are not meaningful: these tasks ran under the Triton interpreter (no GPU), which "
    "checks correctness only; fast_p and the geometric means count no speedup. Re-run on a CUDA "
    "GPU to measure speedups."
)


def _untimed(rows: Sequence[Mapping[str, Any]]) -> bool:
    """No task was timed: every one ran on CPU (the interpreter), or none of the correct ones
    has a time."""
    envs = [r["environment"].split("|", 1)[0] for r in rows if r["environment"]]
    correct = [r for r in rows if r["correct"]]
    if envs and all(env == "cpu" for env in envs):
        return True
    return bool(correct) and all(
        r["speedup_eager"] is None and r["speedup_compiled"] is None for r in correct
    )


def _shared_notes(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Notes that more than one task has (the interpreter's, on CPU), each with its line said
    once above the table ("3 of 3 tasks: ..."), not truncated in every row's cell."""
    counts: dict[str, int] = {}
    for r in rows:
        if r["note"]:
            counts[str(r["note"]).strip()] = counts.get(str(r["note"]).strip(), 0) + 1
    return {note: f"{n} of {len(rows)} tasks: {note}" for note, n in counts.items() if n > 1}


def write_suite_report(
    rows: Iterable[Mapping[str, Any]], out_dir: str | Path, title: str = "kernelwright suite"
) -> dict[str, Path]:
    """Write suite.md, suite.json, suite_speedups.png and suite.html into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = sorted((normal_row(r) for r in rows), key=lambda r: r["task"])
    summary = suite_summary(rows)
    untimed = _untimed(rows)
    png = out / "suite_speedups.png"
    if untimed:  # the chart only where there are times: on CPU it is empty axes
        png.unlink(missing_ok=True)
    plot = None if untimed else plot_suite(rows, png)
    shared = _shared_notes(rows)
    cells = [
        {**r, "note": None if str(r["note"] or "").strip() in shared else r["note"]} for r in rows
    ]
    gpus = _gpu_rows(rows)
    banner = UNTIMED_NOTE if untimed else ""
    md = out / "suite.md"
    md.write_text(
        f"# {title}\n\n"
        + (f"> **Note.** {banner}\n\n" if banner else "")
        + f"{md_table(('Metric', 'Value'), _summary_rows(summary))}\n\n"
        + (f"![Speedup per task]({plot.name})\n\n" if plot else "")
        + "## Tasks\n\n"
        + "".join(f"Note, {line}\n\n" for line in shared.values())
        + f"{md_table(_TASK_HEADERS, [_task_cells(r, r['status']) for r in cells])}\n"
        + (f"\n## GPUs\n\n{md_table(_GPU_HEADERS, gpus)}\n" if gpus else "")
    )
    kernels = [kernel_view(r["task"], str(r["kernel"]), r["status"]) for r in rows if r["kernel"]]
    page = out / "suite.html"
    page.write_text(
        render(
            "suite.html.j2",
            title=title,
            summary=_summary_rows(summary),
            png=png_base64(plot) if plot else None,
            note=banner,
            shared_notes=list(shared.values()),
            task_headers=_TASK_HEADERS,
            tasks=[_task_cells(r, badge(r["status"])) for r in cells],
            gpu_headers=_GPU_HEADERS,
            gpus=gpus,
            kernels=kernels,
        )
    )
    json_rows = [{k: v for k, v in r.items() if k != "kernel"} for r in rows]
    return {
        "markdown": md,
        "json": write_json(out / "suite.json", {"summary": summary, "tasks": json_rows}),
        **({"plot": plot} if plot else {}),
        "html": page,
    }
