"""A run in the results store: its row, its best kernel and the listing of runs, brought up to
date from the run's record (record.py; finalize hands it over, RunRecord.load reads one)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import knobs
from ..sandbox.results import Environment
from ..store import BestKernel, Store, variant_key
from .config import RunConfig, eval_config_for
from .owner import run_status
from .record import RunRecord
from .rundir import RUN_JSON, read_run

if TYPE_CHECKING:
    from ..sandbox.config import EvalConfig
    from ..sandbox.task import Task

DB_NAME = "kernelwright.db"
DB_ENV = knobs.for_field("db").name  # KERNELWRIGHT_DB


def default_db_path(out_dir: str | os.PathLike[str] = "runs") -> str:
    """KERNELWRIGHT_DB, else kernelwright.db inside the directory of run directories.

    Inside, not beside: two out directories with one parent would otherwise share a store
    without anyone asking for it, and `runs --out X` would list the other directory's runs. A
    store shared between out directories (a nightly's, a team's) is a deliberate --db.
    """
    return os.environ.get(DB_ENV) or str(Path(out_dir).resolve() / DB_NAME)


# -- what a run is best for -------------------------------------------------------------------
def task_hash_for(task: Task, eval_config: EvalConfig) -> str:
    """The task's hash as the evaluator reports it: the config's shapes applied."""
    effective = dataclasses.replace(task, overrides={**task.overrides, **eval_config.shapes})
    return effective.hash


def variant_of(config: RunConfig) -> str:
    """What a run's best kernel is best for in the store: dtype and shape overrides."""
    return variant_key(eval_config_for(config))


def environment_key(run: Mapping[str, Any]) -> str:
    """The run's environment key, from its profile (the baseline's environment)."""
    env = (run.get("profile") or {}).get("environment")
    if not env:
        return ""
    known = {f.name for f in dataclasses.fields(Environment)}
    fields: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in env.items() if k in known
    }
    return Environment(**fields).key


# -- the store ------------------------------------------------------------------------------------
def record_start(
    store: Store, run: Mapping[str, Any], models: dict[str, str] | None = None
) -> None:
    """The run's row (a resumed run keeps the row it has)."""
    store.record_run(
        run["run_id"],
        task_path=str(run.get("task", "")),
        task_name=str(run.get("task_name", "")),
        task_hash=str(run.get("task_hash", "")),
        config=run.get("config") or {},
        models=models or run.get("models") or {},
        created=run.get("created"),
    )


def sync_record(store: Store, record: RunRecord) -> None:
    """Bring the store's row of a run up to date with its record, and offer its winner as the
    best kernel of its task on this environment (kept only when faster than the one there)."""
    run = record.run
    record_start(store, run)
    best = record.best
    store.update_run(
        record.run_id,
        status=record.status,
        finished=record.finished,
        stop_reason=record.stop_reason,
        models=record.models,
        usage=record.usage,
        env_key=environment_key(run),
        best_speedup_eager=best.speedup_eager if best else None,
        best_speedup_compiled=best.speedup_compiled if best else None,
        best_roofline_fraction=best.roofline_fraction if best else None,
    )
    winner = record.winner if record.status == "done" else None
    if winner is not None and winner.result.ok:
        store.set_best_kernel(
            winner.source,
            winner.result,
            variant=variant_of(record.run_config),
            task_name=record.task_name,
            run_id=record.run_id,
            # When the run verified it, not when it was synced: a run synced again (or from its
            # files later) leaves the same row, and "most recently verified" stays true.
            verified=record.finished,
            promoted_by="run",  # a faster verified kernel becomes the next version (store.py)
        )


def sync_run(store: Store, run_dir: str | os.PathLike[str]) -> None:
    """sync_record with the record of the run in `run_dir`, read from its files."""
    sync_record(store, RunRecord.load(run_dir))


# -- listing --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunListing:
    """One line of `kernelwright runs`."""

    id: str
    task: str
    created: str
    status: str
    stop_reason: str | None
    best_speedup: float | None  # over eager; None without timings
    verified: bool  # the run has a verified winner


def _listing_from_dir(run_dir: Path) -> RunListing | None:
    try:
        run = read_run(run_dir)
    except (OSError, ValueError):
        return None
    best = run.get("best") or {}
    return RunListing(
        id=run.get("run_id", run_dir.name),
        task=run.get("task_name", ""),
        created=run.get("created", ""),
        status=run_status(run),
        stop_reason=run.get("stop_reason"),
        best_speedup=best.get("speedup_eager"),
        verified=bool(best),
    )


def _same_dir(recorded: Any, root: Path) -> bool:
    if not isinstance(recorded, str) or not recorded:
        return False
    try:
        return Path(recorded).resolve() == root.resolve()
    except OSError:
        return False


def list_runs(store: Store | None, out_dir: str | os.PathLike[str]) -> list[RunListing]:
    """The runs of out_dir, newest first: its run directories, and the store's rows of runs
    that were made in out_dir but whose directory is gone (the store outlives a deleted one).

    A shared store (--db) holds other directories' runs too: those are not listed here, so a
    listing and a run's status never depend on which store the command happened to open.
    """
    root = Path(out_dir)
    found: dict[str, RunListing] = {}
    if root.is_dir():
        for run_json in root.glob(f"*/{RUN_JSON}"):
            listing = _listing_from_dir(run_json.parent)
            if listing is not None:
                found[listing.id] = listing
    if store is not None:
        for r in store.runs(limit=None):
            if r.id in found or not _same_dir(r.config.get("out_dir"), root):
                continue
            found[r.id] = RunListing(
                r.id,
                r.task_name,
                r.created,
                r.status,
                r.stop_reason,
                r.best_speedup_eager,
                r.best_speedup_eager is not None,
            )
    return sorted(found.values(), key=lambda r: (r.created, r.id), reverse=True)


def best_kernels(store: Store) -> list[BestKernel]:
    """The store's best kernel per task, environment and variant (store.BestKernel rows) that a
    run or a nightly verification points at, by task name."""
    keys: dict[tuple[str, str, str], None] = {}
    for r in store.runs(limit=None):
        if r.env_key and r.task_hash:
            keys.setdefault((r.task_hash, r.env_key, variant_of(RunConfig.from_dict(r.config))))
    for h in store.history():
        keys.setdefault((h.task_hash, h.env_key, h.variant))
    found = [store.best_kernel(*key) for key in keys]
    return sorted((b for b in found if b is not None), key=lambda b: (b.task_name, b.gpu))
