"""Kernel versions in the store (kernel_versions.py): the first verified best is v1, a faster
kernel appends the next version, a re-measurement does not, revert brings the previous version
back (append-only: the reverted one stays, stamped), an old store migrates its best kernels to
v1; and the commands promote, revert, history and export of the current version."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from test_cli_support import TASKS, kw
from test_export import GOOD, TUNED

from kernelwright.sandbox.results import Environment, EvalResult, Timing, Timings
from kernelwright.store import MIGRATIONS, SCHEMA_VERSION, Store, StoreError

H100 = Environment(device="cuda", gpu="NVIDIA H100", torch="2.11.0", triton="3.6.0")
A100 = Environment(device="cuda", gpu="NVIDIA A100", torch="2.11.0", triton="3.6.0")


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p25_ms=ms, p75_ms=ms, min_ms=ms, max_ms=ms, reps=50)


def ok(speedup: float | None, *, env: Environment = H100, task_hash: str = "t1") -> EvalResult:
    timed = speedup is not None
    return EvalResult(
        status="ok",
        task="softmax",
        task_hash=task_hash,
        timings=Timings(meaningful=timed, candidate=timing(2.0 / speedup), eager=timing(2.0))
        if timed
        else Timings(meaningful=False),
        speedup_eager=speedup,
        speedup_compiled=speedup / 1.5 if timed else None,
        environment=env,
    )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "kw.db") as s:
        yield s


def numbers(store: Store, **key) -> list[tuple[int, str, str]]:
    return [(v.version, v.source, v.state) for v in store.kernel_versions(**key)]


def test_a_faster_kernel_is_the_next_version_and_a_remeasurement_is_not(store):
    assert store.set_best_kernel("k1", ok(1.5), run_id="r1")
    assert not store.set_best_kernel("slow", ok(1.2), run_id="r2")  # not faster: no version
    assert store.set_best_kernel("k2", ok(2.0), run_id="r3")
    # The nightly's re-measurement of the current kernel changes its record, not its versions.
    assert store.set_best_kernel("k2", ok(1.9), only_if_better=False, promoted_by="nightly")
    assert numbers(store) == [(1, "k1", "previous"), (2, "k2", "current")]
    best = store.best_kernel("t1", H100.key)
    assert (best.version, best.speedup_eager) == (2, 1.9)
    v1, v2 = store.kernel_versions()
    assert (v1.run_id, v1.promoted_by, v1.speedup_eager, v1.candidate_ms) == (
        "r1",
        "run",
        1.5,
        2.0 / 1.5,
    )
    assert v2.speedup_eager == 2.0  # what it was promoted with
    # Per environment: the A100's first kernel is its own v1.
    store.set_best_kernel("a", ok(3.0, env=A100))
    assert numbers(store, env_key=A100.key) == [(1, "a", "current")]


@pytest.mark.parametrize("speedup", [None, 1.5], ids=["interpreter", "timed"])
def test_a_kernel_verified_again_by_a_later_run_keeps_its_origin(store, speedup):
    # issue 25: a chat's cache hit of the optimize run's kernel made `report --db` name the
    # chat run as its source while `history` named the optimize run as v1.
    assert store.set_best_kernel("k1", ok(speedup), run_id="gelu-optimize")
    store.set_best_kernel("k1", ok(speedup), run_id="gelu-chat", only_if_better=False)
    [current] = store.current_kernels()
    [v1] = store.kernel_versions()
    assert (current.version, current.run_id) == (1, "gelu-optimize") == (v1.version, v1.run_id)
    assert store.set_best_kernel("k2", ok(None if speedup is None else 2.0), run_id="gelu-later")
    assert store.current_kernels()[0].run_id == "gelu-later"  # a new kernel: its own run


def test_revert_restores_the_previous_version_and_keeps_the_reverted_one(store):
    for source, speedup in (("k1", 1.5), ("k2", 2.0), ("k3", 2.5)):
        store.set_best_kernel(source, ok(speedup), run_id=f"run-{source}")
    done = store.revert_kernel("t1", H100.key, "fp32", reason="k3 is wrong on batch 1")
    assert (done.from_version.version, done.to_version.version) == (3, 2)
    best = store.best_kernel("t1", H100.key)
    assert (best.source, best.version, best.speedup_eager, best.run_id) == ("k2", 2, 2.0, "run-k2")
    assert numbers(store) == [(1, "k1", "previous"), (2, "k2", "current"), (3, "k3", "reverted")]
    v3 = store.kernel_versions()[2]
    assert (v3.reverted_by, v3.revert_reason) == ("revert", "k3 is wrong on batch 1")
    # A second revert goes further back; past v1 there is nothing, and nothing changes.
    assert store.revert_kernel("t1", H100.key, "fp32").to_version.source == "k1"
    assert store.revert_kernel("t1", H100.key, "fp32") is None
    assert store.best_kernel("t1", H100.key).source == "k1"
    # A new kernel is v4 (numbers are never reused); reverting it skips the reverted v2 and v3.
    store.set_best_kernel("k4", ok(3.0))
    assert store.revert_kernel("t1", H100.key, "fp32").to_version.version == 1
    assert [v.state for v in store.kernel_versions()] == [
        "current", "reverted", "reverted", "reverted"
    ]  # fmt: skip
    with pytest.raises(StoreError, match="no current kernel"):
        store.revert_kernel("t1", A100.key, "fp32")


def test_a_v3_store_migrates_its_best_kernels_to_version_1(tmp_path):
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT)")
    for version in (1, 2, 3):
        for statement in MIGRATIONS[version - 1]:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, 'then')", (version,))
    conn.execute(
        "INSERT INTO best_kernels (task_hash, env_key, variant, gpu, task_name, source, "
        "source_hash, speedup_eager, result, run_id, verified) VALUES ('t1', ?, 'fp32', "
        "'NVIDIA H100', 'softmax', 'old', 'h-old', 1.7, ?, 'r0', '2025-01-01T00:00:00+00:00')",
        (H100.key, ok(1.7).to_json()),
    )
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 4
    (v1,) = store.kernel_versions()
    assert (v1.version, v1.source, v1.promoted_by, v1.current) == (1, "old", "migration", True)
    assert (v1.speedup_eager, v1.run_id, v1.promoted) == (1.7, "r0", "2025-01-01T00:00:00+00:00")
    assert store.best_kernel("t1", H100.key).version == 1
    store.set_best_kernel("new", ok(2.0))  # the old kernel stays one revert away
    assert store.revert_kernel("t1", H100.key, "fp32").to_version.source == "old"
    assert store.integrity_check() == "ok"


# -- the commands ---------------------------------------------------------------------------------
def make_run(out, run_id: str, source: str, speedup: float | None, env=H100) -> None:
    """A finished run directory whose winner (best.py) is `source`, verified at `speedup`."""
    cand = out / run_id / "round_01" / "cand_1"
    cand.mkdir(parents=True)
    result = ok(speedup, env=env, task_hash="gelu-hash") if speedup else None
    (cand / "kernel.py").write_text(source)
    if result is not None:
        (cand / "result.json").write_text(result.to_json())
        (out / run_id / "best.py").write_text(source)
    run = {
        "run_id": run_id,
        "task_name": "gelu",
        "status": "done",
        "finished": "2026-05-01T00:00:00+00:00",
        "best": {"round": 1, "candidate": 1, "path": "best.py"} if result else None,
        "config": {"dtype": "fp32"},
    }
    (out / run_id / "run.json").write_text(json.dumps(run))


def test_promote_revert_history_and_export_of_the_current_version(tmp_path):
    runs, db = tmp_path / "runs", tmp_path / "k.db"
    place = ("--out", runs, "--db", db)
    make_run(runs, "gelu-fast", GOOD, 2.0)
    make_run(runs, "gelu-slow", TUNED, 1.5)
    make_run(runs, "gelu-none", GOOD, None)
    code, out, err = kw("promote", "gelu-fast", *place)
    assert code == 0, err
    assert out.startswith(
        f"promoted run gelu-fast's kernel (round_01/cand_1) to gelu v1 (fp32 on {H100.key})"
    )
    code, out, err = kw("promote", "gelu-slow", *place)
    assert code == 0, err
    assert "to gelu v2" in out and "it replaces v1 (2.00x vs eager)" in out
    assert "note: it is not faster than v1: promoted because you asked" in out
    assert kw("promote", "gelu-slow", *place)[1] == "run gelu-slow's kernel is already gelu v2\n"
    code, out, err = kw("promote", "gelu-none", *place)
    assert (code, out) == (1, "")
    assert "run gelu-none has no verified kernel (the reference stays): nothing to promote" in err

    code, out, err = kw("history", "gelu", *place)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"gelu: fp32 on {H100.key}")
    v2 = next(line for line in lines if "gelu-slow" in line)
    assert "current" in v2 and "promote" in v2 and "not faster than v1" in v2 and "1.50x" in v2
    assert lines.index(v2) < lines.index(next(line for line in lines if "gelu-fast" in line))

    code, out, err = kw("revert", "tests/tasks/gelu.py", *place, "--reason", "wrong on batch 1")
    assert code == 0, err
    assert out.startswith(f"reverted gelu (fp32 on {H100.key}) from v2 to v1: ok, 2.00x vs eager")
    (v1, v2) = json.loads(kw("history", "gelu", *place, "--json")[1])
    assert (v1["state"], v2["state"], v2["revert_reason"]) == (
        "current",
        "reverted",
        "wrong on batch 1",
    )

    target = tmp_path / "gelu_kernel.py"
    code, out, err = kw("export", "gelu", *place, "--to", target)
    assert code == 0, err
    text = target.read_text()
    assert text.startswith("# Exported by kernelwright from run gelu-fast (v1, the current version")
    assert GOOD.rstrip() + "\n" in text and TUNED.rstrip() not in text

    code, out, err = kw("revert", "gelu", *place)
    assert (code, out) == (1, "")
    assert "nothing to revert to: no version before v1" in err


def test_a_task_on_two_environments_needs_env_and_unknown_tasks_say_what_is_there(tmp_path):
    runs, db = tmp_path / "runs", tmp_path / "k.db"
    place = ("--out", runs, "--db", db)
    make_run(runs, "gelu-h100", GOOD, 2.0)
    make_run(runs, "gelu-a100", GOOD, 1.8, env=A100)
    for run in ("gelu-h100", "gelu-a100"):
        assert kw("promote", run, *place)[0] == 0
    code, _, err = kw("revert", "gelu", *place)
    assert code == 2 and "has versions on 2 environments or variants" in err
    assert f"--env '{A100.key}' --variant 'fp32'" in err
    code, out, err = kw("history", "gelu", *place, "--env", "a100")
    assert code == 0 and "gelu: fp32 on NVIDIA A100" in out and "H100" not in out
    code, _, err = kw("history", "relu", *place)
    assert (
        code == 2
        and "no kernel versions of task 'relu'" in err
        and "tasks with versions: gelu" in err
    )
    code, _, err = kw("export", "relu", *place, "--to", tmp_path / "r.py")
    assert code == 2 and "no run 'relu' under" in err and "no kernel versions of task" in err


def test_export_of_the_current_version_behind_the_guard_needs_its_run(tmp_path):
    runs, db = tmp_path / "runs", tmp_path / "k.db"
    place = ("--out", runs, "--db", db)
    make_run(runs, "gelu-fast", GOOD, 2.0)
    (runs / "gelu-fast" / "task.py").write_text((TASKS / "gelu.py").read_text())
    assert kw("promote", "gelu-fast", *place)[0] == 0
    target = tmp_path / "guarded.py"
    code, _, err = kw("export", "gelu", *place, "--to", target, "--guard")
    assert code == 0, err
    assert "KERNELWRIGHT_ENVELOPE" in target.read_text()
    shutil.rmtree(runs / "gelu-fast")
    code, _, err = kw("export", "gelu", *place, "--to", target, "--guard")
    assert code == 2 and "--guard needs the run directory of v1 (run gelu-fast)" in err


def test_promote_of_a_run_whose_directory_is_gone_takes_its_kernel_from_the_store(tmp_path):
    runs, db = tmp_path / "runs", tmp_path / "k.db"
    place = ("--out", runs, "--db", db)
    make_run(runs, "gelu-fast", GOOD, 2.0)
    make_run(runs, "gelu-slow", TUNED, 1.5)
    assert kw("promote", "gelu-fast", *place)[0] == 0
    assert kw("promote", "gelu-slow", *place)[0] == 0
    assert kw("revert", "gelu", *place)[0] == 0  # v1 current again
    shutil.rmtree(runs / "gelu-slow")
    code, out, err = kw("promote", "gelu-slow", *place)
    assert code == 0, err
    assert out.startswith(
        "run gelu-slow's directory is gone: promoting its kernel from the store (gelu v2's source"
    )
    assert "promoted run gelu-slow's kernel (from the store) to gelu v3" in out
    assert "note: it is not faster than v1" in out
    v1, v2, v3 = json.loads(kw("history", "gelu", *place, "--json")[1])
    assert v1["state"] == "previous"
    assert (v3["state"], v3["run_id"], v3["source_hash"]) == (
        "current",
        "gelu-slow",
        v2["source_hash"],
    )
    assert v3["speedup_eager"] == 1.5  # the verdict it was first promoted with
    code, _, err = kw("promote", "gelu-nowhere", *place)
    assert code == 2 and "no run 'gelu-nowhere' under" in err
    assert "holds no kernel of run 'gelu-nowhere' either" in err


def test_history_shows_each_versions_latest_nightly_verdict(tmp_path):
    import dataclasses

    runs, db = tmp_path / "runs", tmp_path / "k.db"
    place = ("--out", runs, "--db", db)
    make_run(runs, "gelu-fast", GOOD, 2.0)
    make_run(runs, "gelu-slow", TUNED, 1.5)
    assert kw("promote", "gelu-fast", *place)[0] == 0
    assert kw("promote", "gelu-slow", *place)[0] == 0
    v1, v2 = json.loads(kw("history", "gelu", *place, "--json")[1])
    assert v1["last_nightly"] is None and v2["last_nightly"] is None
    store = Store(db)
    for h, speedup, night in (
        (v1["source_hash"], 1.9, "2026-05-02"),
        (v2["source_hash"], 1.6, "2026-05-03"),
        (v2["source_hash"], 1.4, "2026-05-04"),
    ):
        r = dataclasses.replace(ok(speedup, task_hash="gelu-hash"), source_hash=h)
        store.record_verification(r, task_name="gelu", night=night)
    store.close()
    v1, v2 = json.loads(kw("history", "gelu", *place, "--json")[1])
    assert (v1["last_nightly"]["night"], v1["last_nightly"]["speedup_eager"]) == ("2026-05-02", 1.9)
    assert (v2["last_nightly"]["night"], v2["last_nightly"]["status"]) == ("2026-05-04", "ok")
    assert v2["speedup_eager"] == 1.5  # beside the verdict it was promoted with
    code, out, err = kw("history", "gelu", *place)
    assert code == 0, err
    assert "last nightly" in out
    row = next(line for line in out.splitlines() if "gelu-slow" in line)
    assert "ok 2026-05-04, 1.40x" in row and "1.50x" in row
