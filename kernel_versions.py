"""Kernel versions: every kernel that became a task's current kernel on one environment (GPU +
software) and variant, numbered from 1, with who promoted it, and the reverts.

The store's schema step for them (MIGRATION, v4 of store.MIGRATIONS) and the queries, run inside
the Store's transactions (store.py imports this module, never the other way round).

- A version is never deleted nor rewritten: promoting a kernel appends version n+1; a revert
  stamps the version it takes back (`reverted`, `reverted_by`, `revert_reason`, set once) and
  points the current pointer at the previous version.
- The current pointer is `best_kernels.version`: the best_kernels row *is* the current version,
  holding its latest measurement (a nightly re-verification updates it); the version row keeps
  the verdict and speedups it was promoted with.
- "The previous version" of the current one is the latest version below it that was never
  reverted: a second revert goes further back, a reverted version is never brought back by
  revert (promote its run again: that appends a new version).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from typing import Any

# Who made a version current: a run's finalize or a sync of its record, `kernelwright promote`,
# the nightly job (a search's winner, or the first version of a kernel on a new software stack),
# and the v4 migration (the best kernel an existing store held becomes version 1).
PROMOTERS = ("run", "promote", "nightly", "migration")
# Who took a version back.
REVERTERS = ("revert", "nightly")

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE kernel_versions (
        task_hash TEXT NOT NULL,
        env_key TEXT NOT NULL,
        variant TEXT NOT NULL,
        version INTEGER NOT NULL,
        gpu TEXT NOT NULL,
        task_name TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL,
        source_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        speedup_eager REAL,
        speedup_compiled REAL,
        roofline_fraction REAL,
        candidate_ms REAL,
        result TEXT NOT NULL,
        run_id TEXT,
        promoted_by TEXT NOT NULL,
        promoted TEXT NOT NULL,
        verified TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        reverted TEXT,
        reverted_by TEXT,
        revert_reason TEXT,
        PRIMARY KEY (task_hash, env_key, variant, version)
    )""",
    "ALTER TABLE best_kernels ADD COLUMN version INTEGER",
    # Every best kernel of an existing store becomes version 1 of its task, environment, variant.
    """INSERT INTO kernel_versions (task_hash, env_key, variant, version, gpu, task_name, source,
        source_hash, status, speedup_eager, speedup_compiled, roofline_fraction, result, run_id,
        promoted_by, promoted, verified, note)
        SELECT task_hash, env_key, variant, 1, gpu, task_name, source, source_hash, 'ok',
        speedup_eager, speedup_compiled, roofline_fraction, result, run_id, 'migration',
        verified, verified, 'the best kernel this store held when versions began'
        FROM best_kernels""",
    "UPDATE best_kernels SET version = 1",
)

Key = tuple[str, str, str]  # task_hash, env_key, variant


@dataclass(frozen=True)
class KernelVersion:
    """One version of a task's kernel on one environment and variant, as it was promoted."""

    task_hash: str
    env_key: str
    variant: str
    version: int
    gpu: str
    task_name: str
    source: str
    source_hash: str
    status: str  # the verdict it was promoted with ("ok": only verified kernels are promoted)
    speedup_eager: float | None
    speedup_compiled: float | None
    roofline_fraction: float | None
    candidate_ms: float | None
    result: str  # the EvalResult it was promoted with, as JSON
    run_id: str | None
    promoted_by: str
    promoted: str
    verified: str  # when its result was measured
    note: str
    reverted: str | None
    reverted_by: str | None
    revert_reason: str | None
    current: bool

    @property
    def state(self) -> str:
        """ "current", "reverted" (taken back: never current again) or "previous"."""
        if self.current:
            return "current"
        return "reverted" if self.reverted else "previous"


@dataclass(frozen=True)
class Revert:
    """What a revert did: the version taken back and the one now current."""

    from_version: KernelVersion
    to_version: KernelVersion
    reason: str


_SELECT = (
    "SELECT v.*, COALESCE(b.version = v.version, 0) AS current FROM kernel_versions v "
    "LEFT JOIN best_kernels b ON b.task_hash = v.task_hash AND b.env_key = v.env_key "
    "AND b.variant = v.variant"
)


def _version(row: sqlite3.Row) -> KernelVersion:
    data = dict(row)
    data["current"] = bool(data["current"])
    return KernelVersion(**data)


def versions(
    conn: sqlite3.Connection,
    task_hash: str | None = None,
    env_key: str | None = None,
    variant: str | None = None,
) -> list[KernelVersion]:
    """Versions by task name, environment, variant, then number (all tasks when unfiltered)."""
    clauses, params = [], []
    for column, value in (("task_hash", task_hash), ("env_key", env_key), ("variant", variant)):
        if value is not None:
            clauses.append(f"v.{column} = ?")
            params.append(value)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(
        f"{_SELECT}{where} ORDER BY v.task_name, v.task_hash, v.env_key, v.variant, v.version",
        params,
    )
    return [_version(r) for r in rows]


def origin_run(conn: sqlite3.Connection, key: Key, version: int) -> str | None:
    """The run a version came from: a later run that verifies the same source again (a chat's
    cache hit, a nightly's re-measurement) is not its origin."""
    row = conn.execute(
        "SELECT run_id FROM kernel_versions WHERE task_hash = ? AND env_key = ? AND variant = ? "
        "AND version = ?",
        (*key, version),
    ).fetchone()
    return row[0] if row is not None else None


def append(conn: sqlite3.Connection, key: Key, fields: dict[str, Any]) -> int:
    """Append the next version of `key` (its number is returned); `fields` are the remaining
    columns up to `note` (the revert columns start empty)."""
    if fields["promoted_by"] not in PROMOTERS:
        raise ValueError(f"promoted_by {fields['promoted_by']!r}: one of {', '.join(PROMOTERS)}")
    row = conn.execute(
        "SELECT MAX(version) FROM kernel_versions WHERE task_hash = ? AND env_key = ? "
        "AND variant = ?",
        key,
    ).fetchone()
    number = (row[0] or 0) + 1
    columns = ["task_hash", "env_key", "variant", "version", *fields]
    conn.execute(
        f"INSERT INTO kernel_versions ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})",
        [*key, number, *fields.values()],
    )
    return number


def revert(
    conn: sqlite3.Connection, key: Key, current: int, *, by: str, reason: str, at: str
) -> Revert | None:
    """Stamp version `current` reverted; the previous version (the latest below it never
    reverted), or None when there is none (nothing is changed then). The caller points
    best_kernels at it."""
    if by not in REVERTERS:
        raise ValueError(f"reverted_by {by!r}: one of {', '.join(REVERTERS)}")
    rows = {v.version: v for v in versions(conn, *key)}
    previous = max((n for n, v in rows.items() if n < current and not v.reverted), default=None)
    if previous is None or current not in rows:
        return None
    conn.execute(
        "UPDATE kernel_versions SET reverted = ?, reverted_by = ?, revert_reason = ? "
        "WHERE task_hash = ? AND env_key = ? AND variant = ? AND version = ?",
        (at, by, reason, *key, current),
    )
    taken_back = replace(rows[current], reverted=at, reverted_by=by, revert_reason=reason)
    return Revert(replace(taken_back, current=False), replace(rows[previous], current=True), reason)
