"""`kernelwright runs` and `kernelwright report`: list runs, a run's report, the store's best."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import EXIT_OK, UserError, columns, open_store, speedup_x


def cmd_runs(args: argparse.Namespace) -> int:
    from ..run.owner import INTERRUPTED
    from ..run.records import default_db_path, list_runs

    db = args.db or default_db_path(args.out)
    store = open_store(db) if Path(db).is_file() else None
    runs = list_runs(store, args.out)[: args.limit]
    if not runs:
        print(f"no runs under {args.out}")
        return EXIT_OK
    rows = [("run", "task", "date", "status", "best", "stop reason")]
    for r in runs:
        best = (
            speedup_x(r.best_speedup)
            if r.best_speedup is not None
            else ("verified" if r.verified else "-")
        )
        status = f"{r.status} (resumable)" if r.status == INTERRUPTED else r.status
        rows.append((r.id, r.task, r.created[:19], status, best, r.stop_reason or "-"))
    print(columns(rows))
    if any(r.status == INTERRUPTED for r in runs):
        where = "" if args.out == "runs" else f" --out {args.out}"
        print(
            f"\ninterrupted runs continue from their last completed step: kernelwright optimize "
            f"--resume RUN_ID{where} (a chat: kernelwright chat --resume RUN_ID{where})"
        )
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from .common import find_run_dir

    if bool(args.run) == bool(args.db):
        raise UserError("report needs a RUN id (or run directory), or --db PATH")
    if args.db:
        return _store_report(args)
    from ..report.run import write_run_report
    from ..run.record import RunRecord

    run_dir = find_run_dir(args.run, args.out)
    files = write_run_report(RunRecord.load(run_dir))
    print(files["markdown"].read_text(), end="")
    print(f"\nreport: {files['markdown']} (and {files['html'].name}, {files['json'].name})")
    return EXIT_OK


def _store_report(args: argparse.Namespace) -> int:
    from ..report.suite import suite_row, write_suite_report
    from ..run.records import best_kernels

    if not Path(args.db).is_file():
        raise UserError(f"no results store at {args.db}")
    kernels = best_kernels(open_store(args.db))
    if not kernels:
        print(f"no verified kernel in {args.db} yet")
        return EXIT_OK
    rows = [("task", "variant", "GPU", "vs eager", "vs compile", "roofline", "run", "verified")]
    for b in kernels:
        roof = f"{b.roofline_fraction:.0%}" if b.roofline_fraction is not None else "-"
        gpu = b.gpu if b.gpu != "cpu" else "cpu (interpreter)"
        rows.append(
            (
                b.task_name,
                b.variant,
                gpu,
                speedup_x(b.speedup_eager),
                speedup_x(b.speedup_compiled),
                roof,
                b.run_id or "-",
                b.verified[:19],
            )
        )
    print(f"best kernels in {args.db}:")
    print(columns(rows))
    if args.to:
        rows = [{**suite_row(b.task_name, b.result), "kernel": b.source} for b in kernels]
        files = write_suite_report(rows, args.to, title=f"kernelwright: best kernels in {args.db}")
        print(f"report: {files['markdown']} (and {files['html'].name}, {files['json'].name})")
    return EXIT_OK
