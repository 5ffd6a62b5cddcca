"""`kernelwright optimize`: search for a faster verified kernel for one task."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from .common import (
    EXIT_MODEL_UNANSWERED,
    EXIT_OK,
    UserError,
    model_unanswered,
    open_evaluator,
    open_store,
    owning,
    read_file,
    resumed_config,
    run_config,
)


def cmd_optimize(args: argparse.Namespace) -> int:
    from ..run.lock import lock_path_for
    from ..run.rundir import RunDir
    from .preflight import PreflightError, check_models

    if not args.task and not args.resume:
        raise UserError("optimize needs a TASK file, or --resume RUN_ID to continue a run")
    if args.task:
        read_file(args.task, "task")
    config = run_config(args)
    db = config.db
    if args.resume:
        resumed = resumed_config(config.out_dir, args.resume)
        db = resumed.db or db  # its candidates went to its own store: keep the run in one
        try:  # a resumed run uses its own models: check those
            check_models(resumed)
        except PreflightError as e:
            raise UserError(str(e)) from None
    store = open_store(db)
    started: dict[str, str] = {}  # the run's id as soon as it has one, for an interruption

    def note_run_id(event: dict[str, Any]) -> None:
        if event.get("event") in ("run.start", "run.resume"):
            started.setdefault("run_id", event["run_id"])

    owner = ExitStack()
    if args.resume:  # one owner at a time, before the evaluator starts: the second says who
        run_dir = RunDir.at(config.out_dir, args.resume).path
        owner.enter_context(owning(lock_path_for(run_dir), f"run {args.resume}", "resume"))
    with owner:
        return _optimize(args, config, store, started, note_run_id)


def _optimize(args, config, store, started, note_run_id) -> int:
    from ..graph import optimize
    from ..report.format import usage_text
    from ..report.verdict import verdict
    from ..sandbox.task import TaskError
    from .progress import progress_view

    run = None
    try:
        with open_evaluator(config) as pool, progress_view(sys.stdout) as listener:
            # The run records into this invocation's store and syncs itself (its finalize, or
            # the graph's driver when it stops before).
            run = optimize(
                config,
                args.task,
                store=store,
                resume=args.resume,
                listeners=[note_run_id, listener],
                pool=pool,
            )
    except (TaskError, ValueError) as e:
        raise UserError(str(e)) from None
    except (KeyboardInterrupt, BrokenPipeError):
        if "run_id" in started:
            where = "" if args.out is None else f" --out {args.out}"
            print(
                f"kernelwright: run {started['run_id']} was interrupted and is resumable: "
                f"kernelwright optimize --resume {started['run_id']}{where}",
                file=sys.stderr,
            )
        raise
    print(f"run directory: {Path(config.out_dir) / run['run_id']}")
    print(verdict(run))
    print(f"LLM: {usage_text(run.get('usage') or {})}.")
    if run.get("stop_reason") == "task-error":
        raise UserError(f"task error: {run.get('stop_detail', 'the reference fails')}")
    return EXIT_MODEL_UNANSWERED if model_unanswered(run, config) else EXIT_OK
