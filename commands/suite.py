"""`kernelwright suite`: its arguments, its notes and its printout (KernelBench's metrics, the
per-task table, what failed and why) and its exit code; the suite itself is suites/suite.py's.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..cluster import ExecutorError
from ..report.suite import level_line
from ..suites.suite import SuiteRunner, TaskOutcome, plan_jobs, write_reports
from ..suites.tasks import SuiteError, find_tasks, graph_optimizer, unmatched
from .common import (
    EXIT_MODEL_UNANSWERED,
    EXIT_NEGATIVE,
    EXIT_OK,
    UserError,
    model_unanswered,
    no_gpu_note,
    open_store,
    owning_outputs,
    run_config,
)
from .progress import plain_listener


# -- the summary ----------------------------------------------------------------------------------
def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _pct(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """KernelBench's metrics, a line each, then what was nobody's candidate's doing."""
    lines = [
        f"tasks: {summary['tasks']}, correct: {summary['correct']} "
        f"(correctness rate {_pct(summary['correctness_rate'])})"
    ]
    for baseline, name in (("eager", "eager"), ("compiled", "torch.compile")):
        fast = summary["fast_p"][baseline]
        lines.append(
            f"fast_p vs {name}: " + ", ".join(f"fast_{p} {_pct(v)}" for p, v in fast.items())
        )
    lines.append(
        f"geometric-mean speedup of correct tasks: {_x(summary['geomean_speedup_eager'])} "
        f"vs eager, {_x(summary['geomean_speedup_compiled'])} vs torch.compile "
        f"({summary['timed']} of {summary['correct']} timed)"
    )
    if len(summary.get("levels", {})) > 1:
        lines += [level_line(n, lv) for n, lv in summary["levels"].items()]
    if len(summary.get("environments", {})) > 1:  # a mixed cluster: each GPU model on its own
        lines += [level_line(f"on {k}", g) for k, g in summary["environments"].items()]
    if summary["correct"] and not summary["timed"]:
        lines.append(
            "no timings here (Triton interpreter): fast_p above 0 and speedups need a CUDA GPU"
        )
    if summary.get("evaluator_errors"):
        lines.append(
            f"evaluator errors: {summary['evaluator_errors']} in "
            f"{summary['tasks_with_evaluator_errors']} task(s): kernelwright failed, not the "
            "candidates (counted apart from candidate failures)"
        )
    if summary.get("task_errors"):
        lines.append(
            f"task errors: {summary['task_errors']} task(s) whose reference itself fails "
            "(see their notes)"
        )
    return lines


def table_lines(outcomes: Sequence[TaskOutcome]) -> list[str]:
    """The per-task table: status, correctness, speedups, roofline, evaluator errors, the run."""
    rows = [
        (
            "task",
            "status",
            "correct",
            "vs eager",
            "vs compile",
            "roofline",
            "bound",
            "eval errors",
            "run",
        )
    ]
    for o in outcomes:
        r = o.row
        rows.append(
            (
                o.label,
                str(r.get("status")) + (" (earlier)" if o.skipped else ""),
                "yes" if r.get("correct") else "no",
                _x(r.get("speedup_eager")),
                _x(r.get("speedup_compiled")),
                _pct(r.get("roofline_fraction")),
                r.get("limiter") or "-",
                str(r.get("evaluator_errors") or 0),
                o.run_id or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


# -- the command ----------------------------------------------------------------------------------
def cmd_suite(args: argparse.Namespace) -> int:

    try:
        paths = find_tasks(args.tasks)
    except SuiteError as e:
        raise UserError(str(e)) from None
    config = run_config(args)
    with owning_outputs(config, "suite"):  # one suite at a time on an --out, a --db
        return _suite(args, paths, config)


def _suite(args: argparse.Namespace, paths: list[Path], config) -> int:
    from ..report.suite import suite_summary
    from .preflight import cuda_available

    optimize = graph_optimizer()
    config, groups = plan_jobs(config, args.jobs, cuda_available())
    no_gpu_note()
    if groups is not None and args.jobs > len(groups):
        print(
            f"kernelwright: note: {len(groups)} job(s), not {args.jobs}: one per GPU at most, "
            "since tasks timed on the same GPU disturb each other's timings",
            file=sys.stderr,
        )
    runner = SuiteRunner(
        optimize,
        config,
        sys.stdout,
        open_store(config.db),
        device_groups=groups,
        stop_at=None if args.stop_after is None else time.monotonic() + args.stop_after,
        redo=tuple(args.redo),
        progress=partial(plain_listener, sys.stdout),  # its lines prefixed '[task] '
    )
    for pattern in unmatched(args.redo, paths):
        print(f"kernelwright: note: --redo {pattern!r} matches no task here", file=sys.stderr)
    try:
        outcomes = runner.run(paths, jobs=args.jobs)
    except ExecutorError as e:
        raise UserError(str(e)) from None
    left = [o for o in outcomes if o.not_started]
    outcomes = [o for o in outcomes if not o.not_started]
    print()
    print("\n".join(summary_lines(suite_summary([o.row for o in outcomes]))))
    print()
    print("\n".join(table_lines(outcomes)))
    files = write_reports(outcomes, Path(config.out_dir))
    print(f"\nreport: {files['markdown']} (and {files['html'].name}, {files['json'].name})")
    if left:
        print(
            f"kernelwright: {len(left)} task(s) not started (--stop-after); run the same command "
            "again to continue: finished tasks are skipped",
            file=sys.stderr,
        )
    errors = [o for o in outcomes if o.error]
    if errors:
        print(f"kernelwright: {len(errors)} task(s) could not run: see above", file=sys.stderr)
    broken = [o for o in outcomes if o.row.get("status") == "task-error"]
    if broken:
        print(
            f"kernelwright: {len(broken)} task(s) whose reference itself fails (task-error): "
            f"{', '.join(o.label for o in broken)}; fix those task files",
            file=sys.stderr,
        )
    internal = [o for o in outcomes if o.row.get("evaluator_errors")]
    if internal:
        count = sum(o.row["evaluator_errors"] for o in internal)
        print(
            f"kernelwright: {count} evaluator error(s), kernelwright's fault and not the "
            f"candidates', in {', '.join(o.label for o in internal)}; `suite --redo TASK` runs "
            "a task again",
            file=sys.stderr,
        )
    unanswered = [o for o in outcomes if model_unanswered(o.run, config, f"[{o.label}] ")]
    if errors or broken or internal:
        return EXIT_NEGATIVE
    return EXIT_MODEL_UNANSWERED if unanswered else EXIT_OK
