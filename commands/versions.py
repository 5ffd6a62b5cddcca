"""`kernelwright promote RUN`, `revert TASK` and `history TASK`: the versions of a task's kernel
in the results store (kernel_versions.py), per environment (GPU + software) and variant."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

from ..decisions import replaces_best
from ..kernel_versions import KernelVersion, Key
from .common import EXIT_NEGATIVE, EXIT_OK, UserError, open_store, speedup_x


def store_path(args: argparse.Namespace) -> str:
    from ..run.records import default_db_path

    return args.db or default_db_path(args.out)


def existing_store(args: argparse.Namespace):
    db = store_path(args)
    if not Path(db).is_file():
        raise UserError(f"no results store at {db} (--db PATH, or $KERNELWRIGHT_DB)")
    return open_store(db)


def _names_task(version: KernelVersion, task: str) -> bool:
    """TASK as a user writes it: the task's name, its file (a path or a suite label such as
    level1/19_relu, whose stem is the name), or a prefix of its hash (8 hex digits or more)."""
    stem = Path(task).stem if task.endswith(".py") or "/" in task else task
    return version.task_name in (task, stem) or (
        len(task) >= 8 and version.task_hash.startswith(task)
    )


def task_versions(
    store, task: str, env: str | None = None, variant: str | None = None
) -> dict[Key, list[KernelVersion]]:
    """The versions of TASK, per (task hash, environment, variant); `env` picks environments by
    their key or a part of it ("H100", "torch 2.11"), `variant` one variant exactly."""
    found: dict[Key, list[KernelVersion]] = {}
    for v in store.kernel_versions():
        if not _names_task(v, task) or (variant is not None and v.variant != variant):
            continue
        if env is not None and env != v.env_key and env.lower() not in v.env_key.lower():
            continue
        found.setdefault((v.task_hash, v.env_key, v.variant), []).append(v)
    return found


def where(key: Key) -> str:
    return f"{key[2]} on {key[1]}"


def one_key(
    store, task: str, env: str | None, variant: str | None, db: str
) -> tuple[Key, list[KernelVersion]]:
    """The one (task, environment, variant) TASK and the selectors name; UserError otherwise."""
    found = task_versions(store, task, env, variant)
    if not found:
        names = sorted({v.task_name for v in store.kernel_versions()})
        known = f"; tasks with versions: {', '.join(names)}" if names else " (it holds none yet)"
        picked = "".join(
            f" {flag} {value!r}"
            for flag, value in (("--env", env), ("--variant", variant))
            if value
        )
        raise UserError(f"no kernel versions of task {task!r}{picked} in {db}{known}")
    if len(found) > 1:
        choices = "; ".join(f"--env '{k[1]}' --variant '{k[2]}'" for k in sorted(found))
        raise UserError(
            f"task {task!r} has versions on {len(found)} environments or variants in {db}: "
            f"pick one with {choices}"
        )
    ((key, versions),) = found.items()
    return key, versions


def _brief(v: KernelVersion) -> str:
    speed = f", {speedup_x(v.speedup_eager)} vs eager" if v.speedup_eager is not None else ""
    run = f", run {v.run_id}" if v.run_id else ""
    return f"{v.status}{speed}{run}, promoted {v.promoted[:19]} by {v.promoted_by}"


# -- promote --------------------------------------------------------------------------------------
def cmd_promote(args: argparse.Namespace) -> int:
    from ..run.record import RunRecord
    from ..run.records import variant_of
    from .common import NoSuchRun, find_run_dir

    try:
        run_dir = find_run_dir(args.run, args.out)
    except NoSuchRun as gone:
        return _promote_from_store(args, gone)
    record = RunRecord.load(run_dir)
    winner = record.winner
    if winner is None or not winner.result.ok:
        print(
            f"kernelwright: run {record.run_id} has no verified kernel (the reference stays): "
            "nothing to promote",
            file=sys.stderr,
        )
        return EXIT_NEGATIVE
    return _promote(
        open_store(store_path(args)),
        winner.source,
        winner.result,
        variant_of(record.run_config),
        record.task_name,
        record.run_id,
        record.finished,
        f"run {record.run_id}'s kernel ({winner.key})",
    )


def _promote_from_store(args: argparse.Namespace, gone: Exception) -> int:
    """RUN's directory is gone: promote the kernel the store kept of it (the latest version
    that run promoted, with the verdict it was promoted with), and say so."""
    from ..sandbox.results import EvalResult

    db = store_path(args)
    if not Path(db).is_file():
        raise gone
    store = open_store(db)
    kept = [v for v in store.kernel_versions() if v.run_id == args.run]
    if not kept:
        raise UserError(f"{gone}; the store {db} holds no kernel of run {args.run!r} either")
    v = max(kept, key=lambda k: (k.promoted, k.version))
    print(
        f"run {args.run}'s directory is gone: promoting its kernel from the store "
        f"({v.task_name} v{v.version}'s source {v.source_hash[:12]}, {where(_key(v))})"
    )
    return _promote(
        store,
        v.source,
        EvalResult.from_json(v.result),
        v.variant,
        v.task_name,
        args.run,
        v.verified,
        f"run {args.run}'s kernel (from the store)",
    )


def _key(v: KernelVersion) -> Key:
    return (v.task_hash, v.env_key, v.variant)


def _promote(store, source, result, variant, task_name, run_id, verified, what: str) -> int:
    key = (result.task_hash, result.environment.key, variant)
    before = store.best_kernel(*key)
    if before is not None and before.source == source:
        print(f"run {run_id}'s kernel is already {task_name} v{before.version}")
        return EXIT_OK
    slower = before is not None and not replaces_best(result.speedup_eager, before.speedup_eager)
    note = (
        f"promoted by hand though not faster than v{before.version} "
        f"({speedup_x(before.speedup_eager)} vs eager)"
        if slower and before is not None
        else ""
    )
    store.set_best_kernel(
        source,
        result,
        variant=variant,
        task_name=task_name,
        run_id=run_id,
        only_if_better=False,
        verified=verified,
        promoted_by="promote",
        note=note,
    )
    after = store.best_kernel(*key)
    assert after is not None  # just written, in the transaction above
    print(f"promoted {what} to {task_name} v{after.version} ({where(key)}): {result.summary()}")
    if before is not None:
        print(f"it replaces v{before.version} ({speedup_x(before.speedup_eager)} vs eager)")
    if slower and before is not None:
        print(
            f"note: it is not faster than v{before.version}: promoted because you asked; "
            f"`kernelwright revert {task_name}` brings v{before.version} back"
        )
    return EXIT_OK


# -- revert ---------------------------------------------------------------------------------------
def cmd_revert(args: argparse.Namespace) -> int:
    from ..store import StoreError

    store = existing_store(args)
    key, versions = one_key(store, args.task, args.env, args.variant, store_path(args))
    reason = args.reason or "by hand (kernelwright revert)"
    try:
        done = store.revert_kernel(*key, by="revert", reason=reason)
    except StoreError as e:
        raise UserError(str(e)) from None
    name = versions[0].task_name
    if done is None:
        current = next((v for v in versions if v.current), None)
        at = f"v{current.version}" if current else "the current version"
        print(
            f"kernelwright: {name} ({where(key)}): nothing to revert to: no version before {at} "
            "that was not reverted already",
            file=sys.stderr,
        )
        return EXIT_NEGATIVE
    print(
        f"reverted {name} ({where(key)}) from v{done.from_version.version} to "
        f"v{done.to_version.version}: {_brief(done.to_version)}"
    )
    return EXIT_OK


# -- history --------------------------------------------------------------------------------------
def _verdict(v: KernelVersion) -> str:
    note = f" ({v.note})" if v.note else ""
    if v.reverted:
        return f"reverted {v.reverted[:10]} by {v.reverted_by}: {v.revert_reason}{note}"
    return v.status + note


def latest_nights(store, key: Key) -> dict[str, object]:
    """The latest nightly re-verification of each source on this task, environment and variant,
    by source hash (a version's kernel is the source it was promoted with)."""
    task_hash, env_key, variant = key
    latest: dict[str, object] = {}
    for row in store.history(task_hash, env_key=env_key):  # oldest first: the last one stays
        if row.variant == variant and row.source_hash:
            latest[row.source_hash] = row
    return latest


def _night(row) -> str:
    if row is None:
        return "-"
    speed = f", {speedup_x(row.speedup_eager)}" if row.speedup_eager is not None else ""
    return f"{row.status} {row.night}{speed}"


def _night_json(row) -> dict | None:
    if row is None:
        return None
    keep = ("night", "status", "rule", "speedup_eager", "speedup_compiled", "message")
    return {k: getattr(row, k) for k in keep}


def history_table(key: Key, versions: list[KernelVersion], nights: dict | None = None):
    from rich.table import Table

    nights = nights or {}
    nightly = any(v.source_hash in nights for v in versions)  # the column only where it says some

    table = Table(title=f"{versions[0].task_name}: {where(key)}", title_justify="left")
    for name, justify in (
        ("v", "right"),
        ("", "center"),
        ("promoted", "left"),
        ("by", "left"),
        ("verdict", "left"),
        ("vs eager", "right"),
        ("vs compile", "right"),
        *([("last nightly", "left")] if nightly else []),
        ("run", "left"),
        ("hash", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for v in reversed(versions):  # the newest first
        table.add_row(
            str(v.version),
            "current" if v.current else "",
            v.promoted[:19].replace("T", " "),
            v.promoted_by,
            _verdict(v),
            speedup_x(v.speedup_eager),
            speedup_x(v.speedup_compiled),
            *([_night(nights.get(v.source_hash))] if nightly else []),
            v.run_id or "-",
            v.source_hash[:12],
            style="bold" if v.current else ("dim" if v.reverted else None),
        )
    return table


def _public(row: dict) -> dict:
    return {k: value for k, value in row.items() if k not in ("source", "result")}


def cmd_history(args: argparse.Namespace) -> int:
    from rich.console import Console

    db = store_path(args)
    store = existing_store(args)
    found = task_versions(store, args.task, args.env, args.variant)
    if not found:
        one_key(store, args.task, args.env, args.variant, db)  # raises, saying what is there
    if args.json:
        nights = {key: latest_nights(store, key) for key in found}
        rows = [
            {
                **_public(dataclasses.asdict(v)),
                "state": v.state,
                "last_nightly": _night_json(nights[key].get(v.source_hash)),
            }
            for key, versions in found.items()
            for v in versions
        ]
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 160
    console = Console(file=sys.stdout, width=width, highlight=False)
    for key in sorted(found):
        console.print(history_table(key, found[key], latest_nights(store, key)))
    return EXIT_OK
