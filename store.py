"""Results store: runs, candidates, baselines, best kernels (each kernel that became one is a
version: kernel_versions.py), nightly history and the verdict cache.

Over 700 lines because the schema (MIGRATIONS), the row records and the Store's queries name
the same columns and change together, so they stay one module (what is "better" is decisions.py's;
the kernel versions' own schema step and queries are kernel_versions.py's).

One SQLite file (stdlib sqlite3) shared by every process of a run or a suite. Safety comes from
SQLite itself, used carefully:
- WAL journal: readers never block the writer and a writer never blocks readers, so suite jobs in
  several processes can record results while a report reads them.
- Every write is one `BEGIN IMMEDIATE ... COMMIT` transaction. IMMEDIATE takes the write lock up
  front: a deferred transaction that reads and then writes can fail with SQLITE_BUSY without the
  busy handler being consulted (the lock upgrade would deadlock), IMMEDIATE just waits its turn.
- synchronous=FULL: in WAL mode NORMAL survives a killed process but may lose the last commits on
  power loss; FULL fsyncs the WAL on every commit, which costs little at our write rate (a few
  rows per candidate, and a candidate takes seconds to evaluate).
- One connection per thread and per process: sqlite3 connections must not cross threads, and a
  connection inherited through fork() must never be used in the child.

The schema is versioned: `schema_version` records each migration applied; MIGRATIONS is the list
of SQL steps, applied in order and only forward. A database newer than this code is refused.

What the result cache holds (see `cacheable`): an identical candidate (source hash) on an identical
task (task hash), environment (GPU + torch + triton: `Environment.key`) and evaluation config
(`config_key`) is evaluated once, and its verdict is reused, *except* for verdicts that may say
more about the machine than about the candidate:
- "timeout" (wall-time or cpu-time): the limits (timeout_s, cpu_time_s) are deliberately not part
  of `EvalConfig.cache_key()`, so a timeout under a 10 s limit must not answer for a 180 s limit;
  and wall time stretches on a busy machine (compilation shares 2-16 cores with other workers).
- "crashed": rule "memory" depends on host_memory_gb (not in the key) and on what else the host
  runs; "signal" includes SIGKILL from the kernel's OOM killer or the pool; "exit" can be a
  driver abort. None of them is reliably the candidate's fault.
- anything whose message says the GPU or host ran out of memory or disk (a shared GPU's other
  tenants cause "CUDA out of memory" as easily as the candidate does).
- results without torch and triton versions in their environment (a worker that died before it
  could report them): their environment key does not identify the environment.
Everything else (ok, rejected, compile_error, runtime_error, incorrect) is a property of the
source on that task, environment and config, so it is cached; the first verdict recorded wins.
An ok result carries the timings measured when it was first evaluated: a nightly re-verification,
whose point is to measure again, must call the evaluator directly instead of `lookup_result`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import kernel_versions
from .decisions import replaces_best
from .errors import KernelwrightError
from .kernel_versions import KernelVersion, Revert
from .sandbox.config import EvalConfig
from .sandbox.results import Baseline, EvalResult, Timing

# Each entry is one schema version: the statements that take the previous version to it.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # v1: runs, their candidates, the verdict cache, baselines, best kernels.
    (
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            task_path TEXT NOT NULL,
            task_name TEXT NOT NULL,
            task_hash TEXT NOT NULL,
            created TEXT NOT NULL,
            finished TEXT,
            status TEXT NOT NULL,
            stop_reason TEXT,
            config TEXT NOT NULL DEFAULT '{}',
            models TEXT NOT NULL DEFAULT '{}',
            best_speedup_eager REAL,
            best_speedup_compiled REAL,
            usage TEXT NOT NULL DEFAULT '{}',
            env_key TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX runs_created ON runs (created)",
        "CREATE INDEX runs_task ON runs (task_hash)",
        """CREATE TABLE candidates (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            round INTEGER NOT NULL,
            idx INTEGER NOT NULL,
            source_hash TEXT NOT NULL,
            source TEXT NOT NULL,
            task_hash TEXT NOT NULL,
            env_key TEXT NOT NULL,
            config_key TEXT NOT NULL,
            status TEXT NOT NULL,
            rule TEXT,
            metrics TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            speedup_eager REAL,
            speedup_compiled REAL,
            cached INTEGER NOT NULL DEFAULT 0,
            created TEXT NOT NULL,
            PRIMARY KEY (run_id, round, idx)
        )""",
        "CREATE INDEX candidates_source ON candidates (task_hash, source_hash)",
        """CREATE TABLE results (
            task_hash TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            env_key TEXT NOT NULL,
            config_key TEXT NOT NULL,
            status TEXT NOT NULL,
            result TEXT NOT NULL,
            created TEXT NOT NULL,
            PRIMARY KEY (task_hash, source_hash, env_key, config_key)
        )""",
        """CREATE TABLE baselines (
            task_hash TEXT NOT NULL,
            env_key TEXT NOT NULL,
            config_key TEXT NOT NULL,
            status TEXT NOT NULL,
            eager_ms REAL,
            compiled_ms REAL,
            roofline_bound_ms REAL,
            baseline TEXT NOT NULL,
            measured TEXT NOT NULL,
            PRIMARY KEY (task_hash, env_key, config_key)
        )""",
        """CREATE TABLE best_kernels (
            task_hash TEXT NOT NULL,
            env_key TEXT NOT NULL,
            variant TEXT NOT NULL,
            gpu TEXT NOT NULL,
            task_name TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            speedup_eager REAL,
            speedup_compiled REAL,
            roofline_fraction REAL,
            result TEXT NOT NULL,
            run_id TEXT,
            verified TEXT NOT NULL,
            PRIMARY KEY (task_hash, env_key, variant)
        )""",
    ),
    # v2: nightly re-verification history; runs remember their best roofline fraction.
    (
        "ALTER TABLE runs ADD COLUMN best_roofline_fraction REAL",
        """CREATE TABLE verifications (
            task_hash TEXT NOT NULL,
            task_name TEXT NOT NULL DEFAULT '',
            night TEXT NOT NULL,
            env_key TEXT NOT NULL,
            variant TEXT NOT NULL,
            status TEXT NOT NULL,
            rule TEXT,
            source_hash TEXT NOT NULL DEFAULT '',
            speedup_eager REAL,
            speedup_compiled REAL,
            candidate_ms REAL,
            eager_ms REAL,
            compiled_ms REAL,
            roofline_fraction REAL,
            message TEXT NOT NULL DEFAULT '',
            recorded TEXT NOT NULL,
            PRIMARY KEY (task_hash, env_key, variant, night)
        )""",
        "CREATE INDEX verifications_night ON verifications (night)",
    ),
    # v3: every nightly invocation keeps its row. v2 replaced a night's row on a rerun, so a
    # second run on one day compared with nothing (its own date's row was the one replaced);
    # now it compares with the run before it, whatever that run's date.
    (
        "ALTER TABLE verifications RENAME TO verifications_v2",
        """CREATE TABLE verifications (
            task_hash TEXT NOT NULL,
            task_name TEXT NOT NULL DEFAULT '',
            night TEXT NOT NULL,
            env_key TEXT NOT NULL,
            variant TEXT NOT NULL,
            status TEXT NOT NULL,
            rule TEXT,
            source_hash TEXT NOT NULL DEFAULT '',
            speedup_eager REAL,
            speedup_compiled REAL,
            candidate_ms REAL,
            eager_ms REAL,
            compiled_ms REAL,
            roofline_fraction REAL,
            message TEXT NOT NULL DEFAULT '',
            recorded TEXT NOT NULL
        )""",
        "INSERT INTO verifications SELECT * FROM verifications_v2 ORDER BY night, recorded",
        "DROP TABLE verifications_v2",
        "CREATE INDEX verifications_night ON verifications (night)",
        "CREATE INDEX verifications_series ON verifications (task_hash, env_key, variant, night)",
    ),
    # v4: kernel versions, and best_kernels' pointer to the current one (kernel_versions.py).
    kernel_versions.MIGRATION,
)
SCHEMA_VERSION = len(MIGRATIONS)

# Writers wait this long for the lock before giving up: a suite's writes last milliseconds, so a
# minute only runs out when something holds a transaction open by mistake.
BUSY_TIMEOUT_S = 60.0

# Messages that mark a runtime failure as the machine's, not the candidate's (see module doc).
TRANSIENT_MARKERS = (
    "out of memory",
    "outofmemoryerror",
    "no space left on device",
    "cannot allocate memory",
    "too many open files",
)

RUN_FIELDS = (
    "task_path",
    "task_name",
    "task_hash",
    "created",
    "finished",
    "status",
    "stop_reason",
    "config",
    "models",
    "best_speedup_eager",
    "best_speedup_compiled",
    "best_roofline_fraction",
    "usage",
    "env_key",
)
_JSON_RUN_FIELDS = frozenset({"config", "models", "usage"})


class StoreError(KernelwrightError):
    """A store that cannot be used as asked (schema too new, bad arguments): one line to show."""

    fault = "configuration"


@dataclass(frozen=True)
class StoredRun:
    """One optimisation run, as `runs` lists it."""

    id: str
    task_path: str
    task_name: str
    task_hash: str
    created: str
    finished: str | None
    status: str
    stop_reason: str | None
    config: dict[str, Any]
    models: dict[str, Any]
    best_speedup_eager: float | None
    best_speedup_compiled: float | None
    best_roofline_fraction: float | None
    usage: dict[str, Any]
    env_key: str


@dataclass(frozen=True)
class CandidateRecord:
    """One evaluated candidate of a run, with the evaluator's full verdict."""

    run_id: str
    round: int
    index: int
    source_hash: str
    source: str
    task_hash: str
    env_key: str
    config_key: str
    status: str
    rule: str | None
    message: str
    result: EvalResult
    cached: bool  # the verdict came from the cache, not from a new evaluation
    created: str


@dataclass(frozen=True)
class BaselineRecord:
    """Reference timings of a task on one environment and config, and when they were measured."""

    task_hash: str
    env_key: str
    config_key: str
    measured: str
    baseline: Baseline

    @property
    def eager_ms(self) -> float | None:
        t = self.baseline.timings
        return t.eager.median_ms if t is not None and t.eager is not None else None

    @property
    def compiled_ms(self) -> float | None:
        t = self.baseline.timings
        return t.compiled.median_ms if t is not None and t.compiled is not None else None


@dataclass(frozen=True)
class BestKernel:
    """The best verified kernel for a task on one environment (GPU + software) and variant."""

    task_hash: str
    env_key: str
    variant: str
    gpu: str
    task_name: str
    source: str
    source_hash: str
    speedup_eager: float | None
    speedup_compiled: float | None
    roofline_fraction: float | None
    run_id: str | None
    verified: str
    result: EvalResult
    version: int | None = None  # the current version's number (kernel_versions)


@dataclass(frozen=True)
class Verification:
    """One nightly re-verification of a task's best kernel: a row of its history."""

    task_hash: str
    task_name: str
    night: str  # ISO date
    env_key: str
    variant: str
    status: str
    rule: str | None
    source_hash: str
    speedup_eager: float | None
    speedup_compiled: float | None
    candidate_ms: float | None
    eager_ms: float | None
    compiled_ms: float | None
    roofline_fraction: float | None
    message: str
    recorded: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def now_iso() -> str:
    """The current UTC time, ISO 8601 with seconds: what every timestamp column holds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def config_key(config: EvalConfig | Mapping[str, Any]) -> str:
    """A stable hash of the config fields that change a verdict (`EvalConfig.cache_key()`)."""
    fields = config.cache_key() if isinstance(config, EvalConfig) else dict(config)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def variant_key(config: EvalConfig) -> str:
    """What a best kernel is best *for*: dtype and shape overrides, e.g. "fp16 N=4096"."""
    shapes = " ".join(f"{k}={v}" for k, v in sorted(config.shapes.items()))
    return f"{config.dtype} {shapes}".strip()


def gpu_of(env_key: str) -> str:
    """The device part of an environment key ("NVIDIA H100|torch 2.11|triton 3.6" -> GPU name)."""
    return env_key.split("|", 1)[0]


def cacheable(result: EvalResult) -> bool:
    """Whether a verdict is the candidate's own and may answer for a later identical evaluation."""
    if result.status in ("timeout", "crashed"):
        return False
    message = result.message.lower()
    if any(marker in message for marker in TRANSIENT_MARKERS):
        return False
    env = result.environment
    return bool(result.task_hash and env.torch and env.triton)


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _medians_ms(result: EvalResult) -> tuple[float | None, float | None, float | None]:
    """Median times of candidate, eager and torch.compile; None where not measured meaningfully."""
    t = result.timings
    if t is None or not t.meaningful:
        return None, None, None
    return _median(t.candidate), _median(t.eager), _median(t.compiled)


def _median(timing: Timing | None) -> float | None:
    return timing.median_ms if timing is not None else None


def _roofline_fraction(result: EvalResult) -> float | None:
    return result.roofline.fraction if result.roofline is not None else None


class Store:
    """The results store at `path` (created, and migrated to SCHEMA_VERSION, on open)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._migrate()

    # -- connections and transactions -------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        # isolation_level=None: autocommit, so that BEGIN/COMMIT below are the only transactions.
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        enable_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it is committed, or none of it."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema -----------------------------------------------------------------------------------

    def schema_version(self) -> int:
        conn = self._conn()
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        if not exists:
            return 0
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return row[0] or 0

    def _migrate(self) -> None:
        if self.schema_version() == SCHEMA_VERSION:
            return
        # Several processes may open a new database at once: the version is read again under the
        # write lock, so each migration runs exactly once.
        with self._write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied TEXT NOT NULL)"
            )
            current = self.schema_version()
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema v{current}, newer than this kernelwright's "
                    f"v{SCHEMA_VERSION}: upgrade kernelwright to use it"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version - 1]:
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_version VALUES (?, ?)", (version, now_iso()))

    def integrity_check(self) -> str:
        """SQLite's own verdict on the file: "ok" when nothing is corrupt."""
        rows = self._conn().execute("PRAGMA integrity_check").fetchall()
        return "; ".join(r[0] for r in rows)

    # -- runs -------------------------------------------------------------------------------------

    def record_run(
        self,
        run_id: str,
        *,
        task_path: str,
        task_name: str,
        task_hash: str,
        config: Mapping[str, Any] | None = None,
        models: Mapping[str, Any] | None = None,
        env_key: str = "",
        created: str | None = None,
        status: str = "running",
    ) -> None:
        """Add a run (a resumed run that is already there keeps its row)."""
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO runs (id, task_path, task_name, task_hash, created, "
                "status, config, models, env_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    task_path,
                    task_name,
                    task_hash,
                    created or now_iso(),
                    status,
                    _dumps(dict(config or {})),
                    _dumps(dict(models or {})),
                    env_key,
                ),
            )

    def update_run(self, run_id: str, **changes: Any) -> None:
        """Change fields of a run: status, finished, stop_reason, best_*, usage, env_key..."""
        unknown = set(changes) - set(RUN_FIELDS)
        if unknown:
            raise StoreError(f"update_run: unknown fields {sorted(unknown)}; known: {RUN_FIELDS}")
        if not changes:
            return
        values = [_dumps(v) if k in _JSON_RUN_FIELDS else v for k, v in changes.items()]
        assignments = ", ".join(f"{k} = ?" for k in changes)
        with self._write() as conn:
            cur = conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", [*values, run_id])
            if cur.rowcount == 0:
                raise StoreError(f"update_run: no run {run_id!r} in {self.path}")

    def run(self, run_id: str) -> StoredRun | None:
        row = self._conn().execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run_record(row) if row is not None else None

    def runs(self, limit: int | None = 50) -> list[StoredRun]:
        """The most recent runs first."""
        rows = self._conn().execute(
            "SELECT * FROM runs ORDER BY created DESC, id DESC LIMIT ?",
            (-1 if limit is None else limit,),
        )
        return [_run_record(r) for r in rows]

    # -- candidates and the verdict cache ---------------------------------------------------------

    def record_candidate(
        self,
        run_id: str,
        round: int,
        index: int,
        source: str,
        result: EvalResult,
        config_key: str,
        *,
        cached: bool = False,
    ) -> None:
        """Record a candidate of a run, and its verdict in the cache when `cacheable`."""
        source_hash = result.source_hash or _text_hash(source)
        env_key = result.environment.key
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO candidates (run_id, round, idx, source_hash, source, "
                "task_hash, env_key, config_key, status, rule, metrics, message, speedup_eager, "
                "speedup_compiled, cached, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    round,
                    index,
                    source_hash,
                    source,
                    result.task_hash,
                    env_key,
                    config_key,
                    result.status,
                    result.rule,
                    result.to_json(),
                    result.message,
                    result.speedup_eager,
                    result.speedup_compiled,
                    int(cached),
                    now_iso(),
                ),
            )
            if cacheable(result):
                _insert_result(conn, result, source_hash, config_key)

    def candidates(self, run_id: str) -> list[CandidateRecord]:
        """A run's candidates in round, then index, order."""
        rows = self._conn().execute(
            "SELECT * FROM candidates WHERE run_id = ? ORDER BY round, idx", (run_id,)
        )
        return [_candidate_record(r) for r in rows]

    def record_result(
        self, result: EvalResult, config_key: str, *, source_hash: str | None = None
    ) -> bool:
        """Cache a verdict; False when it is not `cacheable` (or a verdict is already there)."""
        if not cacheable(result):
            return False
        source_hash = source_hash or result.source_hash
        if not source_hash:
            raise StoreError("record_result: the result has no source_hash; pass source_hash=")
        with self._write() as conn:
            return _insert_result(conn, result, source_hash, config_key)

    def lookup_result(
        self, task_hash: str, source_hash: str, env_key: str, config_key: str
    ) -> EvalResult | None:
        """The cached verdict on this source, task, environment and config, if there is one."""
        row = (
            self._conn()
            .execute(
                "SELECT result FROM results WHERE task_hash = ? AND source_hash = ? "
                "AND env_key = ? AND config_key = ?",
                (task_hash, source_hash, env_key, config_key),
            )
            .fetchone()
        )
        return EvalResult.from_json(row[0]) if row is not None else None

    # -- baselines --------------------------------------------------------------------------------

    def record_baseline(
        self, baseline: Baseline, config_key: str, *, measured: str | None = None
    ) -> None:
        """Store (or replace) a task's reference timings on the baseline's environment."""
        t = baseline.timings
        eager = t.eager.median_ms if t is not None and t.eager is not None else None
        compiled = t.compiled.median_ms if t is not None and t.compiled is not None else None
        bound = baseline.roofline.bound_ms if baseline.roofline is not None else None
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO baselines (task_hash, env_key, config_key, status, "
                "eager_ms, compiled_ms, roofline_bound_ms, baseline, measured) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    baseline.task_hash,
                    baseline.environment.key,
                    config_key,
                    baseline.status,
                    eager,
                    compiled,
                    bound,
                    _dumps(baseline.to_dict()),
                    measured or now_iso(),
                ),
            )

    def baseline(self, task_hash: str, env_key: str, config_key: str) -> BaselineRecord | None:
        row = (
            self._conn()
            .execute(
                "SELECT * FROM baselines WHERE task_hash = ? AND env_key = ? AND config_key = ?",
                (task_hash, env_key, config_key),
            )
            .fetchone()
        )
        if row is None:
            return None
        return BaselineRecord(
            task_hash=row["task_hash"],
            env_key=row["env_key"],
            config_key=row["config_key"],
            measured=row["measured"],
            baseline=Baseline.from_dict(json.loads(row["baseline"])),
        )

    # -- best kernels -----------------------------------------------------------------------------

    def set_best_kernel(
        self,
        source: str,
        result: EvalResult,
        *,
        variant: str = "fp32",
        task_name: str = "",
        run_id: str | None = None,
        only_if_better: bool = True,
        verified: str | None = None,
        promoted_by: str = "run",
        note: str = "",
    ) -> bool:
        """Make a verified kernel the best (the current version) for its task and environment;
        True when it became so.

        Only status "ok" results qualify. With `only_if_better` (the optimiser's case) it replaces
        the current best only when faster vs eager, or when neither was timed
        (decisions.replaces_best: a tie keeps the current best, a measured speedup beats an
        unmeasured one); the nightly job re-verifies and passes False to store the new measurement,
        `kernelwright promote` to make a kernel current whatever its speed.
        A source other than the current version's is appended as the next version
        (kernel_versions), `promoted_by` whom; the current version's own source only updates its
        measurement.
        """
        if result.status != "ok":
            raise StoreError(
                f"set_best_kernel: only verified kernels qualify, this one is {result.status!r}"
            )
        if not result.task_hash:
            raise StoreError("set_best_kernel: the result has no task_hash")
        env_key = result.environment.key
        key = (result.task_hash, env_key, variant)
        source_hash = result.source_hash or _text_hash(source)
        verified = verified or now_iso()
        with self._write() as conn:
            row = conn.execute(
                "SELECT speedup_eager, source, version FROM best_kernels "
                "WHERE task_hash = ? AND env_key = ? AND variant = ?",
                key,
            ).fetchone()
            if (
                only_if_better
                and row is not None
                and not replaces_best(result.speedup_eager, row["speedup_eager"])
            ):
                return False
            if row is not None and row["source"] == source and row["version"] is not None:
                version = row["version"]  # re-measured: one kernel keeps one origin
                run_id = kernel_versions.origin_run(conn, key, version) or run_id
            else:
                version = kernel_versions.append(
                    conn,
                    key,
                    {
                        "gpu": gpu_of(env_key),
                        "task_name": task_name or result.task,
                        "source": source,
                        "source_hash": source_hash,
                        "status": result.status,
                        "speedup_eager": result.speedup_eager,
                        "speedup_compiled": result.speedup_compiled,
                        "roofline_fraction": _roofline_fraction(result),
                        "candidate_ms": _medians_ms(result)[0],
                        "result": result.to_json(),
                        "run_id": run_id,
                        "promoted_by": promoted_by,
                        "promoted": now_iso(),
                        "verified": verified,
                        "note": note,
                    },
                )
            _write_best(
                conn,
                key,
                task_name=task_name or result.task,
                source=source,
                source_hash=source_hash,
                result=result,
                run_id=run_id,
                verified=verified,
                version=version,
            )
            return True

    def current_kernels(self) -> list[BestKernel]:
        """Every task's current kernel (best_kernels), by task name, GPU, environment, variant."""
        rows = self._conn().execute(
            "SELECT * FROM best_kernels ORDER BY task_name, gpu, env_key, variant"
        )
        return [_best_kernel(r) for r in rows]

    def kernel_versions(
        self,
        task_hash: str | None = None,
        env_key: str | None = None,
        variant: str | None = None,
    ) -> list[KernelVersion]:
        """The versions of a task's kernel (kernel_versions.versions: all when unfiltered)."""
        return kernel_versions.versions(self._conn(), task_hash, env_key, variant)

    def revert_kernel(
        self, task_hash: str, env_key: str, variant: str, *, by: str = "revert", reason: str = ""
    ) -> Revert | None:
        """Take the current version back and make the previous one current (kernel_versions);
        None when there is nothing to revert to. StoreError when there is no current version."""
        key = (task_hash, env_key, variant)
        with self._write() as conn:
            row = conn.execute(
                "SELECT version FROM best_kernels WHERE task_hash = ? AND env_key = ? "
                "AND variant = ?",
                key,
            ).fetchone()
            if row is None or row["version"] is None:
                raise StoreError(f"no current kernel for task {task_hash[:12]} on {env_key}")
            done = kernel_versions.revert(
                conn, key, row["version"], by=by, reason=reason, at=now_iso()
            )
            if done is None:
                return None
            back = done.to_version
            _write_best(
                conn,
                key,
                task_name=back.task_name,
                source=back.source,
                source_hash=back.source_hash,
                result=EvalResult.from_json(back.result),
                run_id=back.run_id,
                verified=back.verified,
                version=back.version,
            )
            return done

    def best_kernel(self, task_hash: str, env_key: str, variant: str = "fp32") -> BestKernel | None:
        """The best kernel for exactly this environment (GPU and software versions)."""
        row = (
            self._conn()
            .execute(
                "SELECT * FROM best_kernels WHERE task_hash = ? AND env_key = ? AND variant = ?",
                (task_hash, env_key, variant),
            )
            .fetchone()
        )
        return _best_kernel(row) if row is not None else None

    def best_kernel_on_gpu(
        self, task_hash: str, gpu: str, variant: str = "fp32"
    ) -> BestKernel | None:
        """The most recently verified best kernel on this GPU under any software versions.

        The nightly job starts from it after a torch or triton upgrade, when the exact
        environment has no best kernel yet.
        """
        row = (
            self._conn()
            .execute(
                "SELECT * FROM best_kernels WHERE task_hash = ? AND gpu = ? AND variant = ? "
                "ORDER BY verified DESC LIMIT 1",
                (task_hash, gpu, variant),
            )
            .fetchone()
        )
        return _best_kernel(row) if row is not None else None

    # -- nightly history --------------------------------------------------------------------------

    def record_verification(
        self,
        result: EvalResult,
        *,
        task_name: str = "",
        night: str | None = None,
        variant: str = "fp32",
    ) -> None:
        """One nightly run's re-verification of a task's best kernel: a row of its history (a
        second run on the same night adds a row, so it can be compared with the first)."""
        candidate_ms, eager_ms, compiled_ms = _medians_ms(result)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO verifications (task_hash, task_name, night, env_key, "
                "variant, status, rule, source_hash, speedup_eager, speedup_compiled, "
                "candidate_ms, eager_ms, compiled_ms, roofline_fraction, message, recorded) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    result.task_hash,
                    task_name or result.task,
                    night or dt.date.today().isoformat(),
                    result.environment.key,
                    variant,
                    result.status,
                    result.rule,
                    result.source_hash,
                    result.speedup_eager,
                    result.speedup_compiled,
                    candidate_ms,
                    eager_ms,
                    compiled_ms,
                    _roofline_fraction(result),
                    result.message,
                    now_iso(),
                ),
            )

    def history(
        self, task_hash: str | None = None, *, env_key: str | None = None
    ) -> list[Verification]:
        """Nightly verification rows, oldest first: by night, then in the order they were
        recorded (all tasks when task_hash is None)."""
        clauses, params = [], []
        if task_hash is not None:
            clauses.append("task_hash = ?")
            params.append(task_hash)
        if env_key is not None:
            clauses.append("env_key = ?")
            params.append(env_key)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._conn().execute(
            f"SELECT * FROM verifications {where} "
            "ORDER BY night, task_name, task_hash, recorded, rowid",
            params,
        )
        return [Verification(**dict(r)) for r in rows]


def _insert_result(
    conn: sqlite3.Connection, result: EvalResult, source_hash: str, config_key: str
) -> bool:
    # The first verdict wins: identical inputs give the same verdict, and keeping the first makes
    # concurrent writers of the same candidate agree on what the cache says.
    cur = conn.execute(
        "INSERT OR IGNORE INTO results (task_hash, source_hash, env_key, config_key, status, "
        "result, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            result.task_hash,
            source_hash,
            result.environment.key,
            config_key,
            result.status,
            result.to_json(),
            now_iso(),
        ),
    )
    return cur.rowcount == 1


def _write_best(
    conn: sqlite3.Connection,
    key: tuple[str, str, str],
    *,
    task_name: str,
    source: str,
    source_hash: str,
    result: EvalResult,
    run_id: str | None,
    verified: str,
    version: int,
) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO best_kernels (task_hash, env_key, variant, gpu, task_name, "
        "source, source_hash, speedup_eager, speedup_compiled, roofline_fraction, result, "
        "run_id, verified, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            *key,
            gpu_of(key[1]),
            task_name,
            source,
            source_hash,
            result.speedup_eager,
            result.speedup_compiled,
            _roofline_fraction(result),
            result.to_json(),
            run_id,
            verified,
            version,
        ),
    )


def _run_record(row: sqlite3.Row) -> StoredRun:
    data = dict(row)
    for k in _JSON_RUN_FIELDS:
        data[k] = json.loads(data[k]) if data[k] else {}
    return StoredRun(**data)


def _candidate_record(row: sqlite3.Row) -> CandidateRecord:
    return CandidateRecord(
        run_id=row["run_id"],
        round=row["round"],
        index=row["idx"],
        source_hash=row["source_hash"],
        source=row["source"],
        task_hash=row["task_hash"],
        env_key=row["env_key"],
        config_key=row["config_key"],
        status=row["status"],
        rule=row["rule"],
        message=row["message"],
        result=EvalResult.from_json(row["metrics"]),
        cached=bool(row["cached"]),
        created=row["created"],
    )


def _best_kernel(row: sqlite3.Row) -> BestKernel:
    data = dict(row)
    data["result"] = EvalResult.from_json(data["result"])
    return BestKernel(**data)


def enable_wal(conn: sqlite3.Connection, timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Switch to WAL, retrying while another process holds the file.

    Switching a fresh database's journal mode needs an exclusive lock and SQLite answers
    "database is locked" at once, without its busy handler, when several processes open the
    same new store together (seen: 7 of 15 rounds of six suite writers starting at once; the
    LLM reply cache met it too, in CI).
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
