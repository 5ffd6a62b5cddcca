"""What the commands share: exit codes, the one-line user error, the search commands' RunConfig
(flags, then KERNELWRIGHT_*, then defaults), the results store and a few printing helpers."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import KernelwrightError

# Exit codes: 0 success, 1 the verdict was negative (candidate not ok, regression), 2 bad input,
# 3 a configured model answered no call (the run went on offline; --fallback-offline accepts it);
# 130, 141 and 143 are 128 + SIGINT, SIGPIPE and SIGTERM, as for a process those signals killed.
EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE, EXIT_MODEL_UNANSWERED = 0, 1, 2, 3
EXIT_BROKEN_PIPE = 141
# A KernelwrightError that reaches the CLI's top level exits by its fault (errors.py): what the
# user asked for or the task they gave is bad input (2, as README says of a task whose reference
# fails); a candidate's failure is a negative verdict (1); the evaluator's own failure exits 1,
# as `suite` and `nightly` do when any occurred (and as the uncaught exception it was did).
EXIT_FOR_FAULT: dict[str, int] = {
    "configuration": EXIT_USAGE,
    "task": EXIT_USAGE,
    "candidate": EXIT_NEGATIVE,
    "evaluator": EXIT_NEGATIVE,
}


class UserError(KernelwrightError):
    """A problem with what the user asked for: printed as one line, exit code 2."""

    fault = "configuration"


class NoSuchRun(UserError):
    """RUN names no run directory (under --out, or as a path)."""


def find_run_dir(run: str, out_dir: str) -> Path:
    """A run id under out_dir, or a run directory's path."""
    from ..run.rundir import RunDir

    for candidate in (RunDir.at(out_dir, run), RunDir(run)):
        if candidate.exists():
            return candidate.path
    raise NoSuchRun(f"no run {run!r} under {out_dir} (expected {RunDir.at(out_dir, run).run_json})")


def read_file(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{what} {path!r} does not exist (or is not a file)")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {what} {path!r}: {e}") from None


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def no_gpu_note() -> bool:
    """Say once, on stderr, that nothing can be timed here; True when that is so."""
    from .preflight import NO_GPU_NOTE, cuda_available

    if cuda_available():
        return False
    print(f"kernelwright: {NO_GPU_NOTE}", file=sys.stderr)
    return True


def search_flags(args: argparse.Namespace) -> dict:
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
            "baseline",
            "trials",
            "workers",
            "db",
            "max_memory_gb",
            "executor",
            "ray_address",
            "max_retries",
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


def model_unanswered(run: dict, config, prefix: str = "") -> bool:
    """Say on stderr which roles' model answered no call; True when that ends in exit 3."""
    unanswered = run.get("llm_unanswered") or {}
    if not unanswered:
        return False
    from ..report.verdict import role_order

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


def run_config(args: argparse.Namespace, **overrides):
    """The RunConfig of a search command (flags, then KERNELWRIGHT_*, then defaults), with the
    results store inside the runs directory unless --db or KERNELWRIGHT_DB says otherwise."""
    from ..run.config import resolve_config
    from ..run.records import default_db_path
    from .preflight import PreflightError, check_models

    try:
        config, _ = resolve_config({**search_flags(args), **overrides})
        check_models(config)
        check_executor(config)
    except (ValueError, PreflightError) as e:
        raise UserError(str(e)) from None
    where = not_writable(Path(config.out_dir))
    if where is not None:  # every search command writes its run directories there
        raise UserError(f"--out {config.out_dir}: {where} is not writable")
    return config if config.db else config.replace(db=default_db_path(config.out_dir))


def check_executor(config) -> None:
    """--executor ray without Ray installed fails here, in one line, before any run starts."""
    import importlib.util

    from ..cluster import RAY_MISSING

    if config.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise UserError(RAY_MISSING)


def open_evaluator(config):
    """The invocation's evaluator (cluster.open_evaluator), its start failures as one line."""
    from ..cluster import ExecutorError
    from ..cluster import open_evaluator as open_it

    try:
        return open_it(config)
    except ExecutorError as e:
        raise UserError(str(e)) from None


def open_store(path: str):
    import sqlite3

    from ..store import Store, StoreError

    try:
        return Store(path)
    except (StoreError, sqlite3.Error, OSError) as e:
        where = not_writable(Path(path).parent)
        why = f"{where} is not writable" if where else str(e)
        raise UserError(f"cannot open the results store {path}: {why}") from None


def not_writable(directory: Path) -> Path | None:
    """The directory (or its nearest existing parent, where it is still to be made) when this
    process cannot write there; None when it can."""
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    return None if os.access(directory, os.W_OK | os.X_OK) else directory


@contextmanager
def owning(path: Path, what: str, command: str) -> Iterator[None]:
    """Hold the lock at `path` (run.lock) for the block: another process holding it, or a
    directory that is not writable, is one line and exit 2."""
    from ..run.lock import Busy, NotWritable, held

    try:
        with held(path, what, command):
            yield
    except (Busy, NotWritable) as e:
        raise UserError(str(e)) from None


@contextmanager
def owning_outputs(config, command: str) -> Iterator[None]:
    """A suite's or a night's --out and --db, each with one owner at a time."""
    from ..run.lock import lock_path_for, store_lock_path

    with (
        owning(lock_path_for(config.out_dir), f"--out {config.out_dir}", command),
        owning(store_lock_path(config.db), f"--db {config.db}", command),
    ):
        yield


def resumed_config(out_dir: str, run_id: str):
    """A run's own config (to check its models before resuming it)."""
    from ..run.config import RunConfig
    from ..run.rundir import RunDir

    rundir = RunDir.at(out_dir, run_id)
    if not rundir.exists():
        raise UserError(f"no run {run_id!r} under {out_dir} (expected {rundir.run_json})")
    return RunConfig.from_dict(rundir.read_run().get("config") or {})


def speedup_x(value) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def columns(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)
