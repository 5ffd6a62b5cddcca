"""The `kernelwright` command: argument parsing and thin commands over the package."""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Exit codes: 0 success, 1 the verdict was negative (candidate not ok, regression), 2 bad input,
# 3 a configured model answered no call (the run went on offline; --fallback-offline accepts it);
# 130, 141 and 143 are 128 + SIGINT, SIGPIPE and SIGTERM, as for a process those signals killed.
EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE, EXIT_MODEL_UNANSWERED = 0, 1, 2, 3
EXIT_BROKEN_PIPE = 141


class UserError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that answers a bad argument with one line, what was wrong and where the options
    are listed, instead of the usage block (16 lines for optimize) above the one that matters."""

    def error(self, message: str):  # type: ignore[override]
        raise UserError(f"{message} (`{self.prog} --help` lists the options)")


def _at_least(minimum: int):
    """An argparse type: an integer no smaller than `minimum` (--rounds 0 would still run one)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _number(low: float, high: float | None = None, *, low_open: bool = False):
    """An argparse type: a finite float in [low, high] (low excluded when `low_open`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        below = value <= low if low_open else value < low
        if not math.isfinite(value) or below or (high is not None and value > high):
            bound = f"above {low:g}" if low_open else f"at least {low:g}"
            bound += f" and at most {high:g}" if high is not None else ""
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    return parse


_COUNT = _at_least(1)


def _shape(text: str) -> tuple[str, int | tuple[int, ...]]:
    from .sandbox.task import parse_size

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--shape expects NAME=VALUE, got {text!r}")
    try:
        return name.strip(), parse_size(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shape {name}: {value!r} is not an integer or a tuple of integers (3,5)"
        ) from None


def _add_max_memory(p: argparse.ArgumentParser) -> None:
    """--max-memory GB, for eval and the search commands alike."""
    p.add_argument(
        "--max-memory",
        dest="max_memory_gb",
        type=_number(0.0, low_open=True),
        default=None,
        metavar="GB",
        help="device memory a candidate may peak at (default: max(4x the reference's peak, "
        "the reference's peak + 1 GiB))",
    )


def _duration(text: str) -> float:
    from .run.config import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _budget(text: str) -> float:
    """A time budget: a duration above zero (a budget of 0 would stop before the first round)."""
    seconds = _duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be longer than 0 s, got {text!r}")
    return seconds


def _role_tokens(text: str) -> tuple[str | None, int]:
    """`8192` (every role) or `coder=8192` (one role) for --context-window/--max-output-tokens."""
    from .run.config import ROLES

    role, sep, value = text.rpartition("=")
    if sep and role.strip() not in ROLES:
        raise argparse.ArgumentTypeError(
            f"{role.strip()!r} is not a role; expected TOKENS or ROLE=TOKENS with ROLE one of "
            f"{', '.join(ROLES)}"
        )
    try:
        tokens = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of tokens") from None
    if tokens <= 0:
        raise argparse.ArgumentTypeError(f"{tokens} tokens: expected a positive number")
    return (role.strip() or None), tokens


def _night(text: str) -> str:
    import datetime as dt

    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"--night expects YYYY-MM-DD, got {text!r}") from None


def _add_task_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dtype",
        choices=["fp32", "fp16", "bf16"],
        default="fp32",
        help="cast model and floating inputs (as KernelBench does)",
    )
    p.add_argument(
        "--shape",
        type=_shape,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a size constant of the task (repeatable; a tuple as NAME=3,5)",
    )


def _eval_config(args: argparse.Namespace):
    from .sandbox.config import EvalConfig

    fields = {"dtype": args.dtype, "shapes": dict(args.shape)}
    for name in ("trials", "precision", "timeout_s", "max_memory_gb"):
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    if getattr(args, "no_compile", False):
        fields["compile_baseline"] = False
    if getattr(args, "cuda_graphs", False):
        fields["cuda_graphs"] = True
    return EvalConfig(**fields)


def _read_file(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{what} {path!r} does not exist (or is not a file)")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {what} {path!r}: {e}") from None


def _load_task(path: str, shapes: list[tuple[str, int]]):
    from .sandbox.task import TaskError, load_task

    _read_file(path, "task")
    try:
        return load_task(path, dict(shapes))
    except TaskError as e:
        raise UserError(str(e)) from None


def _judged_task(args: argparse.Namespace):
    """(task, EvalConfig) as eval and baseline judge them: without CUDA the task is shrunk for
    the Triton interpreter, as optimize does, unless --shape set the sizes; one line says so."""
    from .agents.shrink import interpreter_sizes
    from .commands.preflight import NO_GPU_NOTE, cuda_available
    from .sandbox.task import TaskError

    task = _load_task(args.task, args.shape)
    config = _eval_config(args)
    if cuda_available():
        return task, config
    try:
        shapes, note = interpreter_sizes(task, dict(args.shape))
    except TaskError as e:
        raise UserError(f"{e}; set the sizes with --shape NAME=VALUE") from None
    if args.shape or not shapes:
        print(f"kernelwright: {NO_GPU_NOTE}", file=sys.stderr)
        return task, config
    print(f"kernelwright: {note}", file=sys.stderr)
    return task, config.replace(shapes=shapes)


def _ran_at(task, dtype: str, overrides: dict[str, int], precision: str | None) -> str:
    """'  ran at: fp32 (precision strict), batch_size=16, dim=4096 (task: batch_size=4096, ...)'."""
    sizes = {**task.constants, **overrides}
    text = ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "no size constants"
    if sizes != task.constants:
        text += (
            " (the task's own: "
            + ", ".join(f"{k}={v}" for k, v in sorted(task.constants.items()))
            + ")"
        )
    policy = f" (precision {precision})" if precision else ""
    return f"  ran at: {dtype}{policy}, {text}"


def _with_ran_at(report: str, line: str) -> str:
    head, _, rest = report.partition("\n")
    return "\n".join(part for part in (head, line, rest) if part)


def cmd_eval(args: argparse.Namespace) -> int:
    from .sandbox import evaluate
    from .sandbox.summary import format_result

    source = _read_file(args.candidate, "candidate")
    task, config = _judged_task(args)
    result = evaluate(task, source, config)
    if args.json:
        print(result.to_json(indent=2))
    else:
        overrides = result.shape_overrides or {**task.overrides, **config.shapes}
        ran = _ran_at(task, result.dtype, overrides, config.precision)
        print(_with_ran_at(format_result(result, task_name=task.name), ran))
    if result.environment.sandbox_note:
        print(f"kernelwright: {result.environment.sandbox_note}", file=sys.stderr)
    if result.fault == "task":
        raise UserError(f"task error: {_first_line(result.message)}; fix the task file")
    if result.fault == "evaluator":
        print(
            f"kernelwright: internal evaluator error [{result.rule}]: kernelwright failed, not "
            "the candidate, so nothing was learned about it; try again, and report it if it "
            "persists",
            file=sys.stderr,
        )
    return EXIT_OK if result.ok else EXIT_NEGATIVE


def cmd_baseline(args: argparse.Namespace) -> int:
    from .sandbox import baseline
    from .sandbox.summary import format_baseline

    task, config = _judged_task(args)
    result = baseline(task, config)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        overrides = result.shape_overrides or {**task.overrides, **config.shapes}
        ran = _ran_at(task, result.dtype, overrides, config.precision)
        print(_with_ran_at(format_baseline(result, task_name=task.name), ran))
    if result.task_error:
        raise UserError(f"task error: {_first_line(result.message)}; fix the task file")
    return EXIT_OK if result.ok else EXIT_NEGATIVE


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def _no_gpu_note() -> bool:
    """Say once, on stderr, that nothing can be timed here; True when that is so."""
    from .commands.preflight import NO_GPU_NOTE, cuda_available

    if cuda_available():
        return False
    print(f"kernelwright: {NO_GPU_NOTE}", file=sys.stderr)
    return True


# -- the search commands (optimize, suite, nightly, chat) ---------------------------------------
def _search_flags(args: argparse.Namespace) -> dict:
    """RunConfig flags from the shared search options (None: not given on the command line)."""
    flags = {
        name: getattr(args, name, None)
        for name in (
            "model",
            "planner_model",
            "coder_model",
            "critic_model",
            "rounds",
            "candidates",
            "patience",
            "margin",
            "roofline_target",
            "budget_usd",
            "budget_tokens",
            "dtype",
            "precision",
            "trials",
            "workers",
            "db",
            "max_memory_gb",
        )
    }
    flags |= {
        "time_budget_s": getattr(args, "time_budget", None),
        "shapes": dict(getattr(args, "shape", None) or []) or None,
        "tune": False if getattr(args, "no_tune", False) else None,
        "fusion_seed": False if getattr(args, "no_fusion_seed", False) else None,
        "out_dir": getattr(args, "out", None),
        "no_cache": True if getattr(args, "no_cache", False) else None,
        "fallback_offline": True if getattr(args, "fallback_offline", False) else None,
    }
    for option in ("context_window", "max_output_tokens"):
        for role, tokens in getattr(args, option, None) or []:
            flags[f"{role}_{option}" if role else option] = tokens
    return flags


def _unanswered(run: dict, config, prefix: str = "") -> bool:
    """Say on stderr which roles' model answered no call; True when that ends in exit 3."""
    unanswered = run.get("llm_unanswered") or {}
    if not unanswered:
        return False
    from .run.rundir import role_order

    models, roles = run.get("models") or {}, role_order(unanswered)
    who = ", ".join(f"{role} ({models.get(role, '?')})" for role in roles)
    last = " ".join(unanswered[roles[0]].split())[:300]
    accepted = config.fallback_offline
    print(
        f"kernelwright: {prefix}the configured model answered no call for {who}; the run used the "
        f"rules and the fusion codegen instead (last error: {last}). "
        + (
            "Accepted (--fallback-offline)."
            if accepted
            else "Exit 3; fix the endpoint, or pass --fallback-offline to accept an offline run."
        ),
        file=sys.stderr,
    )
    return not accepted


def _run_config(args: argparse.Namespace, **overrides):
    """The RunConfig of a search command (flags, then KERNELWRIGHT_*, then defaults), with the
    results store inside the runs directory unless --db or KERNELWRIGHT_DB says otherwise."""
    from .commands.preflight import PreflightError, check_models
    from .run.config import resolve_config
    from .run.records import default_db_path

    try:
        config, _ = resolve_config({**_search_flags(args), **overrides})
        check_models(config)
    except (ValueError, PreflightError) as e:
        raise UserError(str(e)) from None
    return config if config.db else config.replace(db=default_db_path(config.out_dir))


def _open_store(path: str):
    import sqlite3

    from .store import Store, StoreError

    try:
        return Store(path)
    except (StoreError, sqlite3.Error, OSError) as e:
        raise UserError(f"cannot open the results store {path}: {e}") from None


def _resumed_config(out_dir: str, run_id: str):
    """A run's own config (to check its models before resuming it)."""
    from .run.config import RunConfig
    from .run.rundir import RunDir

    rundir = RunDir.at(out_dir, run_id)
    if not rundir.exists():
        raise UserError(f"no run {run_id!r} under {out_dir} (expected {rundir.run_json})")
    return RunConfig.from_dict(rundir.read_run().get("config") or {})


def cmd_optimize(args: argparse.Namespace) -> int:
    from .commands.preflight import PreflightError, check_models
    from .commands.progress import progress_view
    from .graph import optimize
    from .run.records import sync_run
    from .run.rundir import RunDir, verdict
    from .sandbox.task import TaskError

    if not args.task and not args.resume:
        raise UserError("optimize needs a TASK file, or --resume RUN_ID to continue a run")
    if args.task:
        _read_file(args.task, "task")
    config = _run_config(args)
    db = config.db
    if args.resume:
        resumed = _resumed_config(config.out_dir, args.resume)
        db = resumed.db or db  # its candidates went to its own store: keep the run in one
        try:  # a resumed run uses its own models: check those
            check_models(resumed)
        except PreflightError as e:
            raise UserError(str(e)) from None
    store, run = _open_store(db), None
    started: dict[str, str] = {}  # the run's id as soon as it has one, for an interruption

    def note_run_id(event: dict[str, Any]) -> None:
        if event.get("event") in ("run.start", "run.resume"):
            started.setdefault("run_id", event["run_id"])

    try:
        with progress_view(sys.stdout) as listener:
            run = optimize(config, args.task, resume=args.resume, listeners=[note_run_id, listener])
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
    finally:
        run_id = run["run_id"] if run else started.get("run_id", args.resume)
        if run_id and RunDir.at(config.out_dir, run_id).exists():
            sync_run(store, RunDir.at(config.out_dir, run_id).path)
    print(f"run directory: {Path(config.out_dir) / run['run_id']}")
    print(verdict(run))
    if run.get("stop_reason") == "task-error":
        raise UserError(f"task error: {run.get('stop_detail', 'the reference fails')}")
    return EXIT_MODEL_UNANSWERED if _unanswered(run, config) else EXIT_OK


def cmd_suite(args: argparse.Namespace) -> int:
    from .commands import suite
    from .commands.preflight import cuda_available
    from .graph import optimize
    from .report import suite_summary

    try:
        paths = suite.find_tasks(args.tasks)
    except suite.SuiteError as e:
        raise UserError(str(e)) from None
    config = suite.workers_per_job(_run_config(args), args.jobs, cuda_available())
    _no_gpu_note()
    groups = None
    if args.jobs > 1 and cuda_available():
        import torch

        gpus = torch.cuda.device_count()
        groups = suite.device_groups(gpus, args.jobs)
        if args.jobs > len(groups):
            print(
                f"kernelwright: note: {len(groups)} job(s), not {args.jobs}: one per GPU at most, "
                "since tasks timed on the same GPU disturb each other's timings",
                file=sys.stderr,
            )
    runner = suite.SuiteRunner(
        optimize,
        config,
        sys.stdout,
        _open_store(config.db),
        device_groups=groups,
        stop_at=None if args.stop_after is None else time.monotonic() + args.stop_after,
        redo=tuple(args.redo),
    )
    labels = [suite.task_label(p) for p in paths]
    for pattern in args.redo:
        if not any(fnmatch.fnmatchcase(label, pattern) for label in labels):
            print(f"kernelwright: note: --redo {pattern!r} matches no task here", file=sys.stderr)
    outcomes = runner.run(paths, jobs=args.jobs)
    left = [o for o in outcomes if o.not_started]
    outcomes = [o for o in outcomes if not o.not_started]
    print()
    print("\n".join(suite.summary_lines(suite_summary([o.row for o in outcomes]))))
    print()
    print("\n".join(suite.table_lines(outcomes)))
    files = suite.write_reports(outcomes, Path(config.out_dir))
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
    unanswered = [o for o in outcomes if _unanswered(o.run, config, f"[{o.label}] ")]
    if errors or broken or internal:
        return EXIT_NEGATIVE
    return EXIT_MODEL_UNANSWERED if unanswered else EXIT_OK


def cmd_nightly(args: argparse.Namespace) -> int:
    from .commands import nightly, suite
    from .graph import optimize
    from .report import NIGHTLY_SLOWDOWN
    from .sandbox.pool import EvalPool

    try:
        paths = suite.find_tasks(args.suite)
    except suite.SuiteError as e:
        raise UserError(str(e)) from None
    config = _run_config(args)
    no_gpu = _no_gpu_note()
    store = _open_store(config.db)
    night = args.night or nightly.today()
    with EvalPool(config.workers) as pool:
        job = nightly.Nightly(
            optimize,
            config,
            store,
            pool,
            sys.stdout,
            night=night,
            slowdown=NIGHTLY_SLOWDOWN if args.slowdown is None else args.slowdown,
            search=not args.no_search,
            cuda=not no_gpu,
        )
        outcomes = job.run(paths)
    report_dir = Path(args.report or Path(config.db).parent / "nightly" / night)
    files = job.write_report(outcomes, report_dir)
    bad = nightly.failed(outcomes)
    print(f"report: {files['markdown']} (and {files['html'].name}, {files['json'].name})")
    unanswered = [o for o in outcomes if _unanswered(o.run, config, f"[{o.label}] ")]
    if bad:
        print(
            f"kernelwright: nightly {night}: {len(bad)} of {len(outcomes)} task(s) regressed or "
            f"failed: {', '.join(o.label for o in bad)}",
            file=sys.stderr,
        )
        internal = [o for o in bad if o.evaluator_error]
        if internal:
            print(
                f"kernelwright: {len(internal)} of them are evaluator errors, kernelwright's "
                f"fault and not the kernels' (their kernels were kept, not measured): "
                f"{', '.join(o.label for o in internal)}",
                file=sys.stderr,
            )
        return EXIT_NEGATIVE
    if unanswered:  # the searches ran offline: no regression, but not the night that was asked
        return EXIT_MODEL_UNANSWERED
    print(f"nightly {night}: {len(outcomes)} task(s), no regression")
    return EXIT_OK


def cmd_chat(args: argparse.Namespace) -> int:
    from .commands import chat
    from .commands.preflight import PreflightError, check_models
    from .graph import optimize
    from .sandbox.task import TaskError

    if bool(args.task) == bool(args.resume):
        raise UserError("chat needs a TASK file, or --resume RUN_ID to continue a chat")
    if args.task:
        _read_file(args.task, "task")
    if args.resume and args.start_from:
        raise UserError("--from starts a new chat; it cannot be combined with --resume")
    # One candidate per message unless asked: the person reads each verdict before the next.
    config = _run_config(args, candidates=args.candidates or 1)
    resumed = _resumed_config(config.out_dir, args.resume) if args.resume else None
    store = _open_store((resumed.db if resumed else None) or config.db)
    try:
        if resumed is not None:
            check_models(resumed)
            session = chat.resume_chat(
                optimize, config.out_dir, args.resume, inp=sys.stdin, out=sys.stdout, store=store
            )
        else:
            session = chat.start_chat(
                optimize,
                config,
                args.task,
                inp=sys.stdin,
                out=sys.stdout,
                start_from=args.start_from,
                store=store,
            )
        return session.loop()
    except (chat.ChatError, PreflightError, TaskError, ValueError) as e:
        raise UserError(str(e)) from None


def _x(value) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _columns(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def cmd_runs(args: argparse.Namespace) -> int:
    from .run.records import default_db_path, list_runs
    from .run.rundir import INTERRUPTED

    db = args.db or default_db_path(args.out)
    store = _open_store(db) if Path(db).is_file() else None
    runs = list_runs(store, args.out)[: args.limit]
    if not runs:
        print(f"no runs under {args.out}")
        return EXIT_OK
    rows = [("run", "task", "date", "status", "best", "stop reason")]
    for r in runs:
        best = (
            _x(r.best_speedup)
            if r.best_speedup is not None
            else ("verified" if r.verified else "-")
        )
        status = f"{r.status} (resumable)" if r.status == INTERRUPTED else r.status
        rows.append((r.id, r.task, r.created[:19], status, best, r.stop_reason or "-"))
    print(_columns(rows))
    if any(r.status == INTERRUPTED for r in runs):
        where = "" if args.out == "runs" else f" --out {args.out}"
        print(
            f"\ninterrupted runs continue from their last completed step: kernelwright optimize "
            f"--resume RUN_ID{where} (a chat: kernelwright chat --resume RUN_ID{where})"
        )
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from .commands.export import ExportError, find_run_dir

    if bool(args.run) == bool(args.db):
        raise UserError("report needs a RUN id (or run directory), or --db PATH")
    if args.db:
        return _store_report(args)
    from .report import write_run_report

    try:
        run_dir = find_run_dir(args.run, args.out)
    except ExportError as e:
        raise UserError(str(e)) from None
    files = write_run_report(run_dir)
    print(files["markdown"].read_text(), end="")
    print(f"\nreport: {files['markdown']} (and {files['html'].name}, {files['json'].name})")
    return EXIT_OK


def _store_report(args: argparse.Namespace) -> int:
    from .report import suite_row, write_suite_report
    from .run.records import best_kernels

    if not Path(args.db).is_file():
        raise UserError(f"no results store at {args.db}")
    kernels = best_kernels(_open_store(args.db))
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
                _x(b.speedup_eager),
                _x(b.speedup_compiled),
                roof,
                b.run_id or "-",
                b.verified[:19],
            )
        )
    print(f"best kernels in {args.db}:")
    print(_columns(rows))
    if args.to:
        rows = [{**suite_row(b.task_name, b.result), "kernel": b.source} for b in kernels]
        files = write_suite_report(rows, args.to, title=f"kernelwright: best kernels in {args.db}")
        print(f"report: {files['markdown']} (and {files['html'].name}, {files['json'].name})")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from .commands.export import ExportError, NoWinner, export_run, find_run_dir

    try:
        done = export_run(find_run_dir(args.run, args.out), args.to)
    except NoWinner as e:
        print(f"kernelwright: {e}", file=sys.stderr)
        return EXIT_NEGATIVE
    except ExportError as e:
        raise UserError(str(e)) from None
    tuned = ", ".join(f"{k}={v}" for k, v in sorted(done.tuned.items())) or "as written"
    print(f"wrote {done.path}: ModelNew of run {done.run_id} ({done.key}), constants {tuned}")
    return EXIT_OK


def _add_search_options(p: argparse.ArgumentParser, *, budget_alias: bool = False) -> None:
    """The options every command that runs the agent loop shares."""
    p.add_argument("--model", help="model of every agent; 'offline' = rules + fusion codegen")
    p.add_argument("--planner-model", help="the planner's model (default: --model)")
    p.add_argument("--coder-model", help="the coder's model (default: --model)")
    p.add_argument("--critic-model", help="the critic's model (default: --model)")
    p.add_argument("--rounds", type=_COUNT, help="at most this many rounds (default 5)")
    p.add_argument("--candidates", type=_COUNT, help="candidates per round (default 3)")
    p.add_argument(
        "--patience",
        type=_COUNT,
        help="stop after this many rounds without a better kernel (default 2)",
    )
    p.add_argument(
        "--margin", type=_number(0.0), help="relative gain that counts as better (default 0.02)"
    )
    p.add_argument(
        "--roofline-target",
        type=_number(0.0, 1.0, low_open=True),
        help="stop at this fraction of the roofline (default 0.9)",
    )
    p.add_argument(
        "--budget-usd", type=_number(0.0, low_open=True), help="stop once LLM calls cost this much"
    )
    p.add_argument("--budget-tokens", type=_COUNT, help="stop once LLM calls used this many tokens")
    names = ["--time-budget", "--budget"] if budget_alias else ["--time-budget"]
    p.add_argument(
        *names,
        dest="time_budget",
        type=_budget,
        metavar="DURATION",
        help="stop after this much work, e.g. 30m or 1h30m",
    )
    p.add_argument(
        "--dtype",
        choices=["fp32", "fp16", "bf16"],
        default=None,
        help="cast model and floating inputs (default fp32)",
    )
    p.add_argument(
        "--shape",
        type=_shape,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a size constant of the task (repeatable; a tuple as NAME=3,5)",
    )
    p.add_argument("--precision", choices=["strict", "tf32-ok"], default=None)
    p.add_argument("--trials", type=_COUNT, help="correctness trials per candidate (default 3)")
    _add_max_memory(p)
    p.add_argument("--workers", type=_COUNT, help="evaluator worker processes")
    p.add_argument("--no-tune", action="store_true", help="skip the `# tune:` constant sweep")
    p.add_argument(
        "--no-fusion-seed",
        action="store_true",
        help="do not add the fusion codegen's kernel to round 1",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="do not replay cached LLM replies, nor what endpoints taught earlier runs",
    )
    p.add_argument(
        "--context-window",
        type=_role_tokens,
        action="append",
        metavar="[ROLE=]TOKENS",
        help="the model's context window, input plus output (default: known for OpenAI models, "
        "else 32768, and what the server states in its errors); ROLE=TOKENS sets one role's "
        "(planner, coder, critic); repeatable; env KERNELWRIGHT_[ROLE_]CONTEXT_WINDOW",
    )
    p.add_argument(
        "--max-output-tokens",
        type=_role_tokens,
        action="append",
        metavar="[ROLE=]TOKENS",
        help="the most tokens a reply may use (default 8192, fitted to what the window leaves "
        "after the prompt); ROLE=TOKENS sets one role's; repeatable; env "
        "KERNELWRIGHT_[ROLE_]MAX_OUTPUT_TOKENS",
    )
    p.add_argument(
        "--fallback-offline",
        action="store_true",
        help="accept a run whose configured model answered no call (done with the rules and "
        "the fusion codegen) as a success; without it such a run exits 3",
    )
    _add_place_options(p)


def _add_place_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="directory of run directories (default ./runs)")
    p.add_argument(
        "--db",
        metavar="PATH",
        help="results store (default: $KERNELWRIGHT_DB, else kernelwright.db inside --out); "
        "give the same PATH to several out directories to share one",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernelwright",
        description="Turn PyTorch programs into fast, verified Triton kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("eval", help="judge one candidate kernel: correctness, checks, times")
    p.add_argument("task", help="KernelBench-format task file (Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="candidate file defining ModelNew")
    _add_task_options(p)
    p.add_argument("--trials", type=_COUNT, default=None, help="correctness trials (default 3)")
    p.add_argument(
        "--precision",
        choices=["strict", "tf32-ok"],
        default=None,
        help="strict (default): fp32 must be fp32-accurate; tf32-ok accepts TF32",
    )
    p.add_argument(
        "--timeout",
        dest="timeout_s",
        type=_number(0.0, low_open=True),
        default=None,
        help="wall-clock seconds for the candidate (default 180)",
    )
    _add_max_memory(p)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--cuda-graphs", action="store_true", help="time CUDA-graph replays")
    p.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("baseline", help="time a task: PyTorch eager, torch.compile and roofline")
    p.add_argument("task")
    _add_task_options(p)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_baseline)

    p = sub.add_parser("optimize", help="search for a faster verified kernel for one task")
    p.add_argument("task", nargs="?", help="KernelBench-format task file (omit with --resume)")
    _add_search_options(p)
    p.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="continue a run (under --out) from its last completed step, with its own settings",
    )
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("suite", help="optimize many tasks; KernelBench metrics at the end")
    p.add_argument("tasks", nargs="+", metavar="DIR|TASK", help="task files or directories")
    p.add_argument(
        "--jobs",
        type=_COUNT,
        default=1,
        help="tasks optimized at once (default 1); on GPUs at most one job per GPU",
    )
    p.add_argument(
        "--stop-after",
        type=_duration,
        metavar="DURATION",
        help="start no task after this long (e.g. 50m): a window for cron; a rerun continues",
    )
    p.add_argument(
        "--redo",
        action="append",
        default=[],
        metavar="TASK",
        help="run this task again though an earlier suite in --out finished it, replacing its "
        "row: a label as the suite prints it (level1/36_cumsum_rows) or a glob ('level2/*'); "
        "repeatable",
    )
    _add_search_options(p)
    p.set_defaults(func=cmd_suite)

    p = sub.add_parser("nightly", help="re-verify and re-time best kernels; fail on regression")
    p.add_argument("suite", nargs="+", metavar="SUITE", help="task files or directories")
    p.add_argument(
        "--slowdown",
        type=_number(0.0),
        default=None,
        help="a kernel this much slower than the night before is a regression (default 0.10)",
    )
    p.add_argument("--no-search", action="store_true", help="only re-verify; never search again")
    p.add_argument("--night", type=_night, help="the night's date, YYYY-MM-DD (default today)")
    p.add_argument(
        "--report", metavar="DIR", help="report directory (default: nightly/NIGHT beside the store)"
    )
    _add_search_options(p, budget_alias=True)
    p.set_defaults(func=cmd_nightly)

    p = sub.add_parser("chat", help="refine one kernel interactively, round by round")
    p.add_argument("task", nargs="?", help="KernelBench-format task file (omit with --resume)")
    p.add_argument(
        "--from",
        dest="start_from",
        metavar="RUN|KERNEL",
        help="start from a run's best kernel or a kernel file",
    )
    p.add_argument("--resume", metavar="RUN_ID", help="continue a chat left earlier")
    _add_search_options(p)
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("runs", help="list runs: task, date, best speedup, stop reason")
    p.add_argument("--limit", type=_COUNT, default=50, help="at most this many, newest first")
    _add_place_options(p)
    p.set_defaults(func=cmd_runs, out="runs")

    p = sub.add_parser("report", help="write and print a run's report, or the store's best")
    p.add_argument("run", nargs="?", metavar="RUN", help="run id (under --out) or run directory")
    p.add_argument("--to", metavar="DIR", help="with --db: also write the report files here")
    _add_place_options(p)
    p.set_defaults(func=cmd_report, out="runs")

    p = sub.add_parser("export", help="write a run's winning kernel as a standalone module")
    p.add_argument("run", metavar="RUN", help="run id (under --out) or run directory")
    p.add_argument("--to", required=True, metavar="FILE.py", help="the module to write")
    p.add_argument("--out", default="runs", help="directory of run directories (default ./runs)")
    p.set_defaults(func=cmd_export)

    return parser


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null (when stdout has one: not an in-process StringIO)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cron or CI timeout, `kill`): unwinds like Ctrl-C."""


def _on_signal(signum: int, frame: Any) -> None:
    """Ctrl-C or SIGTERM: stop every evaluation of this process first (other threads may be
    waiting on them, and a killed evaluation must not come back as a verdict), then unwind the
    main thread; runs are left resumable."""
    from .sandbox.pool import cancel_open_pools

    cancel_open_pools()
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UserError as e:
        print(f"kernelwright: {e}", file=sys.stderr)
        return EXIT_USAGE
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, _on_signal)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit flush
        return code
    except UserError as e:
        print(f"kernelwright: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated:
        print("kernelwright: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("kernelwright: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `kernelwright ... | head`: the reader left. Point stdout at /dev/null so that the exit's
        # flush does not fail again, say why on stderr, and exit as a process killed by SIGPIPE
        # would (141), which is what a shell's pipefail expects of a stopped writer.
        _silence_stdout()
        if args.command in ("optimize", "suite", "nightly", "chat"):  # work was cut short
            print("kernelwright: stopped: the output was closed (broken pipe)", file=sys.stderr)
        return EXIT_BROKEN_PIPE
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
