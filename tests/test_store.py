"""Tests of the results store: schema and migrations, the verdict cache, concurrency, crashes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
import time

import pytest

from kernelwright.sandbox.config import EvalConfig
from kernelwright.sandbox.results import (
    Baseline,
    Environment,
    EvalResult,
    Roofline,
    Timing,
    Timings,
)
from kernelwright.store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Store,
    StoreError,
    cacheable,
    config_key,
    variant_key,
)

H100 = Environment(device="cuda", gpu="NVIDIA H100", torch="2.11.0", triton="3.6.0")
H100_NEW = Environment(device="cuda", gpu="NVIDIA H100", torch="2.12.0", triton="3.7.0")
A100 = Environment(device="cuda", gpu="NVIDIA A100", torch="2.11.0", triton="3.6.0")
KEY = config_key(EvalConfig())


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p25_ms=ms * 0.99, p75_ms=ms * 1.01, min_ms=ms, max_ms=ms, reps=50)


def result(
    status: str = "ok",
    *,
    source_hash: str = "src1",
    task_hash: str = "task1",
    env: Environment = H100,
    speedup: float | None = 2.0,
    rule: str | None = None,
    message: str = "",
) -> EvalResult:
    ok = status == "ok"
    timings = (
        Timings(meaningful=True, candidate=timing(1.0), eager=timing(2.0), compiled=timing(1.5))
        if ok
        else None
    )
    return EvalResult(
        status=status,  # type: ignore[arg-type]
        rule=rule,
        message=message,
        task="softmax",
        task_hash=task_hash,
        source_hash=source_hash,
        timings=timings,
        speedup_eager=speedup if ok else None,
        speedup_compiled=speedup / 1.5 if ok and speedup else None,
        roofline=Roofline(1000, 10, 3000.0, 900.0, 0.5, "memory", fraction=0.5) if ok else None,
        environment=env,
    )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "kw.db") as s:
        yield s


def add_run(store: Store, run_id: str = "r1", created: str | None = None) -> None:
    store.record_run(
        run_id,
        task_path="tasks/softmax.py",
        task_name="softmax",
        task_hash="task1",
        config={"rounds": 3},
        models={"coder": "m"},
        created=created,
    )


# -- schema ---------------------------------------------------------------------------------------


def test_new_store_is_at_latest_version_in_wal_mode(store):
    assert store.schema_version() == SCHEMA_VERSION == len(MIGRATIONS)
    assert store._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.integrity_check() == "ok"
    # Opening again is a no-op: no migration runs twice.
    again = Store(store.path)
    assert again.schema_version() == SCHEMA_VERSION
    rows = store._conn().execute("SELECT version FROM schema_version").fetchall()
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))


def test_v1_database_is_migrated_forward_keeping_its_rows(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT)")
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version VALUES (1, '2025-01-01T00:00:00+00:00')")
    conn.execute(
        "INSERT INTO runs (id, task_path, task_name, task_hash, created, status, "
        "best_speedup_eager) VALUES ('old', 't.py', 't', 'task1', '2025-01-01', 'done', 1.7)"
    )
    r = result()
    conn.execute(
        "INSERT INTO candidates VALUES ('old', 1, 0, 'src1', 'source', 'task1', ?, ?, 'ok', "
        "NULL, ?, '', 2.0, 1.3, 0, '2025-01-01')",
        (r.environment.key, KEY, r.to_json()),
    )
    conn.commit()
    conn.close()

    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION
    old = store.run("old")
    assert old is not None and old.best_speedup_eager == 1.7
    assert old.best_roofline_fraction is None  # the column v2 added
    [cand] = store.candidates("old")
    assert cand.result == r
    store.update_run("old", best_roofline_fraction=0.4)
    assert store.run("old").best_roofline_fraction == 0.4
    store.record_verification(r, night="2025-01-02")  # the table v2 added
    store.record_verification(r, night="2025-01-02")  # v3: a rerun is a row of its own
    assert len(store.history("task1")) == 2
    assert store.integrity_check() == "ok"


def test_v2_history_is_kept_by_the_v3_migration(tmp_path):
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT)")
    for version in (1, 2):
        for statement in MIGRATIONS[version - 1]:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, 'then')", (version,))
    for night, speedup in (("2025-01-02", 2.0), ("2025-01-01", 1.8)):
        conn.execute(
            "INSERT INTO verifications (task_hash, task_name, night, env_key, variant, status, "
            "speedup_eager, recorded) VALUES ('task1', 'softmax', ?, 'env', 'fp32', 'ok', ?, ?)",
            (night, speedup, night + "T03:00:00+00:00"),
        )
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION
    assert [(r.night, r.speedup_eager) for r in store.history("task1")] == [
        ("2025-01-01", 1.8),
        ("2025-01-02", 2.0),
    ]
    assert store.integrity_check() == "ok"


def test_database_newer_than_the_code_is_refused(tmp_path):
    path = tmp_path / "new.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this kernelwright"):
        Store(path)


# -- runs and candidates --------------------------------------------------------------------------


def test_runs_are_recorded_updated_and_listed_newest_first(store):
    add_run(store, "r1", created="2025-01-01T00:00:00+00:00")
    add_run(store, "r2", created="2025-01-02T00:00:00+00:00")
    store.update_run(
        "r1",
        status="done",
        stop_reason="patience",
        best_speedup_eager=1.9,
        usage={"cost_usd": 0.12, "per_agent": {"coder": {"calls": 3}}},
    )
    r1 = store.run("r1")
    assert (r1.status, r1.stop_reason, r1.best_speedup_eager) == ("done", "patience", 1.9)
    assert r1.usage["per_agent"]["coder"]["calls"] == 3
    assert r1.config == {"rounds": 3} and r1.models == {"coder": "m"}
    assert [r.id for r in store.runs()] == ["r2", "r1"]
    assert [r.id for r in store.runs(limit=1)] == ["r2"]
    assert store.run("nope") is None
    with pytest.raises(StoreError, match="unknown fields"):
        store.update_run("r1", colour="red")
    with pytest.raises(StoreError, match="no run"):
        store.update_run("nope", status="done")


def test_candidates_round_trip_and_feed_the_cache(store):
    add_run(store)
    ok, bad = result(source_hash="a"), result("incorrect", source_hash="b", rule="mismatch")
    store.record_candidate("r1", 1, 0, "source a", ok, KEY)
    store.record_candidate("r1", 1, 1, "source b", bad, KEY)
    store.record_candidate("r1", 2, 0, "source a", ok, KEY, cached=True)
    cands = store.candidates("r1")
    assert [(c.round, c.index, c.status, c.cached) for c in cands] == [
        (1, 0, "ok", False),
        (1, 1, "incorrect", False),
        (2, 0, "ok", True),
    ]
    assert cands[1].rule == "mismatch" and cands[1].result == bad
    assert cands[0].source == "source a" and cands[0].env_key == H100.key
    assert store.lookup_result("task1", "b", H100.key, KEY) == bad
    with pytest.raises(sqlite3.IntegrityError):
        store.record_candidate("no-such-run", 1, 0, "x", ok, KEY)


def test_cache_key_is_task_source_environment_and_config(store):
    r = result()
    assert store.record_result(r, KEY)
    assert store.lookup_result("task1", "src1", H100.key, KEY) == r
    other_config = config_key(EvalConfig(dtype="fp16"))
    misses = [
        ("task2", "src1", H100.key, KEY),
        ("task1", "src2", H100.key, KEY),
        ("task1", "src1", A100.key, KEY),
        ("task1", "src1", H100_NEW.key, KEY),
        ("task1", "src1", H100.key, other_config),
    ]
    for key in misses:
        assert store.lookup_result(*key) is None, key
    # The first verdict wins (identical inputs; concurrent writers agree on one).
    assert not store.record_result(result(speedup=3.0), KEY)
    assert store.lookup_result("task1", "src1", H100.key, KEY).speedup_eager == 2.0


def test_config_key_ignores_limits_but_not_what_changes_a_verdict():
    base = EvalConfig()
    assert config_key(base) == config_key(EvalConfig()) == config_key(base.cache_key())
    assert config_key(base.replace(timeout_s=5.0, host_memory_gb=1.0)) == config_key(base)
    for change in ({"dtype": "fp16"}, {"shapes": {"N": 64}}, {"trials": 5}, {"reps": 10}):
        assert config_key(base.replace(**change)) != config_key(base), change
    assert variant_key(base.replace(dtype="fp16", shapes={"N": 64, "B": 2})) == "fp16 B=2 N=64"


@pytest.mark.parametrize(
    ("status", "rule", "message", "env", "expected"),
    [
        ("ok", None, "", H100, True),
        ("rejected", "import", "import os is not allowed", H100, True),
        ("compile_error", None, "triton.CompilationError at line 3", H100, True),
        ("runtime_error", None, "IndexError: out of range", H100, True),
        ("incorrect", "mismatch", "12 of 4096 elements differ", H100, True),
        ("timeout", "wall-time", "killed after 180 s", H100, False),
        ("timeout", "cpu-time", "RLIMIT_CPU", H100, False),
        ("crashed", "memory", "worker above 16 GB", H100, False),
        ("crashed", "signal", "SIGKILL", H100, False),
        ("crashed", "exit", "exit code 1", H100, False),
        ("runtime_error", None, "torch.OutOfMemoryError: CUDA out of memory.", H100, False),
        ("compile_error", None, "OSError: No space left on device", H100, False),
        ("incorrect", "mismatch", "", Environment(device="cuda", gpu="H100"), False),
    ],
)
def test_only_verdicts_on_the_candidate_are_cached(store, status, rule, message, env, expected):
    r = result(status, rule=rule, message=message, env=env)
    assert cacheable(r) is expected
    assert store.record_result(r, KEY) is expected
    assert (store.lookup_result("task1", "src1", env.key, KEY) is not None) is expected


def test_uncacheable_candidate_is_recorded_but_not_cached(store):
    add_run(store)
    store.record_candidate("r1", 1, 0, "s", result("timeout", rule="wall-time"), KEY)
    assert [c.status for c in store.candidates("r1")] == ["timeout"]
    assert store.lookup_result("task1", "src1", H100.key, KEY) is None


# -- baselines, best kernels, history -------------------------------------------------------------


def test_baselines_per_task_environment_and_config(store):
    b = Baseline(
        status="ok",
        task="softmax",
        task_hash="task1",
        timings=Timings(meaningful=True, eager=timing(2.0), compiled=timing(1.5)),
        roofline=Roofline(1000, 10, 3000.0, 900.0, 0.5, "memory"),
        environment=H100,
    )
    store.record_baseline(b, KEY, measured="2025-01-01T00:00:00+00:00")
    got = store.baseline("task1", H100.key, KEY)
    assert got.baseline == b and (got.eager_ms, got.compiled_ms) == (2.0, 1.5)
    assert got.measured == "2025-01-01T00:00:00+00:00"
    assert store.baseline("task1", A100.key, KEY) is None
    assert store.baseline("task1", H100.key, config_key(EvalConfig(dtype="fp16"))) is None


def test_best_kernel_only_for_verified_results_and_only_when_faster(store):
    with pytest.raises(StoreError, match="only verified"):
        store.set_best_kernel("bad", result("incorrect", rule="mismatch"))
    assert store.set_best_kernel("v1", result(source_hash="h1", speedup=1.5), run_id="r1")
    assert not store.set_best_kernel("v2", result(source_hash="h2", speedup=1.2))
    assert store.set_best_kernel("v3", result(source_hash="h3", speedup=2.5))
    best = store.best_kernel("task1", H100.key)
    assert (best.source, best.speedup_eager, best.roofline_fraction) == ("v3", 2.5, 0.5)
    assert best.result.source_hash == "h3" and best.gpu == "NVIDIA H100"
    # The nightly job re-verifies and stores the new measurement even when it is lower.
    assert store.set_best_kernel("v3", result(source_hash="h3", speedup=2.3), only_if_better=False)
    assert store.best_kernel("task1", H100.key).speedup_eager == 2.3
    # Per environment and per variant.
    assert store.best_kernel("task1", A100.key) is None
    assert store.best_kernel("task1", H100.key, variant="fp16") is None
    store.set_best_kernel("new", result(env=H100_NEW), verified="2099-01-01T00:00:00+00:00")
    assert store.best_kernel_on_gpu("task1", "NVIDIA H100").source == "new"
    assert store.best_kernel_on_gpu("task1", "NVIDIA A100") is None


def test_history_is_ordered_by_night_and_a_rerun_keeps_both_rows(store):
    store.record_verification(result(speedup=2.0), task_name="softmax", night="2025-01-02")
    store.record_verification(result(speedup=1.8), task_name="softmax", night="2025-01-01")
    store.record_verification(result(speedup=2.1), task_name="softmax", night="2025-01-02")
    store.record_verification(result(task_hash="task2"), task_name="gelu", night="2025-01-01")
    rows = store.history("task1")
    # The second run of 2025-01-02 is a row of its own, after the first: it has a previous.
    assert [(r.night, r.speedup_eager) for r in rows] == [
        ("2025-01-01", 1.8),
        ("2025-01-02", 2.0),
        ("2025-01-02", 2.1),
    ]
    assert rows[0].candidate_ms == 1.0 and rows[0].eager_ms == 2.0 and rows[0].status == "ok"
    assert len(store.history()) == 4
    assert store.history(env_key=A100.key) == []


# -- concurrency and crashes ----------------------------------------------------------------------

WRITERS, ROWS_PER_WRITER = 4, 100


def _writer(path: str, writer: int, barrier) -> None:
    barrier.wait()  # all open a fresh database at once: migration races too
    store = Store(path)
    run_id = f"run{writer}"
    store.record_run(run_id, task_path="t.py", task_name="t", task_hash="task1")
    for i in range(ROWS_PER_WRITER):
        # Writers share half their sources, so they also race on the same cache rows.
        r = result(source_hash=f"s{i % (ROWS_PER_WRITER // 2)}" if i % 2 else f"w{writer}-{i}")
        store.record_candidate(run_id, 1, i, f"source {i}", r, KEY)
        store.update_run(run_id, best_speedup_eager=float(i))
    store.close()


def test_concurrent_writer_processes_lose_nothing_and_corrupt_nothing(tmp_path):
    path = str(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(path, w, barrier)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    store = Store(path)
    assert store.integrity_check() == "ok"
    assert store.schema_version() == SCHEMA_VERSION
    conn = store._conn()
    assert (
        conn.execute("SELECT COUNT(*) FROM candidates").fetchone()[0] == WRITERS * ROWS_PER_WRITER
    )
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == WRITERS
    # Even rows have a source of their own, odd rows share theirs with every other writer.
    own = WRITERS * (ROWS_PER_WRITER // 2)
    shared = {f"s{i % (ROWS_PER_WRITER // 2)}" for i in range(1, ROWS_PER_WRITER, 2)}
    assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == own + len(shared)
    assert {r.best_speedup_eager for r in store.runs()} == {float(ROWS_PER_WRITER - 1)}


def _opener(path: str, writer: int, barrier) -> None:
    barrier.wait()
    store = Store(path)
    store.record_run(f"run{writer}", task_path="t.py", task_name="t", task_hash="h")
    for i in range(20):  # keep writing while the others are still opening the file
        store.record_candidate(f"run{writer}", 1, i, "s", result(source_hash=f"o{i}"), KEY)


@pytest.mark.slow
def test_many_processes_opening_a_new_store_at_once(tmp_path):
    # Switching a new file to WAL fails at once ("database is locked") while another process
    # holds it; before the retry, about half of such rounds lost a writer.
    ctx = multiprocessing.get_context("spawn")
    for attempt in range(4):
        path = str(tmp_path / f"fresh{attempt}.db")
        barrier = ctx.Barrier(6)
        procs = [ctx.Process(target=_opener, args=(path, w, barrier)) for w in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * 6
        assert len(Store(path).runs()) == 6


def test_threads_sharing_a_store_each_get_their_own_connection(store):
    add_run(store)

    def write(thread: int) -> None:
        for i in range(50):
            r = result(source_hash=f"t{thread}-{i}")
            store.record_candidate("r1", thread, i, "s", r, KEY)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.candidates("r1")) == 200
    assert store.integrity_check() == "ok"


COMMITTED = 25


def _killed_mid_transaction(path: str, inside) -> None:
    store = Store(path)
    store.record_run("r1", task_path="t.py", task_name="t", task_hash="task1")
    for i in range(COMMITTED):
        store.record_candidate("r1", 1, i, f"source {i}", result(source_hash=f"c{i}"), KEY)
    with store._write() as conn:
        # Enough data (~8 MB) that SQLite spills uncommitted pages into the WAL file before the
        # kill: the crash happens mid-write, not before the first byte.
        big = "x" * 4000
        for i in range(2000):
            conn.execute(
                "INSERT INTO candidates VALUES ('r1', 2, ?, 'h', ?, 'task1', 'e', 'k', 'ok', "
                "NULL, '{}', '', NULL, NULL, 0, 'now')",
                (i, big),
            )
        inside.set()
        time.sleep(600)


def test_process_killed_mid_transaction_keeps_earlier_commits(tmp_path):
    path = str(tmp_path / "crash.db")
    ctx = multiprocessing.get_context("spawn")
    inside = ctx.Event()
    proc = ctx.Process(target=_killed_mid_transaction, args=(path, inside))
    proc.start()
    try:
        deadline = time.monotonic() + 120
        while not inside.wait(0.2):  # fail fast, with its exit code, if the child dies early
            assert proc.is_alive(), f"the child exited early with code {proc.exitcode}"
            assert time.monotonic() < deadline, "the child never reached its long transaction"
        assert os.path.getsize(path + "-wal") > 4_000_000  # uncommitted frames are on disk
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
    finally:
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.exitcode == -signal.SIGKILL
    store = Store(path)
    assert store.integrity_check() == "ok"
    cands = store.candidates("r1")
    assert [c.index for c in cands] == list(range(COMMITTED))
    assert all(c.result.ok for c in cands)
    # The killed writer's lock died with it: the database takes new writes at once.
    store.record_candidate("r1", 3, 0, "after", result(source_hash="after"), KEY)
    assert len(store.candidates("r1")) == COMMITTED + 1
    assert store.lookup_result("task1", "c0", H100.key, KEY) is not None
