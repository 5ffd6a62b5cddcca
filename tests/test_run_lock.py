"""One owner at a time (issue 25): a run directory, a suite's or a night's --out and --db are
held by one process; a second invocation says who holds them (pid, host, since) and exits 2,
and a dead owner's lock is free. A read-only --out says so in words, not sqlite's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli_support import TASKS, kw

from kernelwright.run.lock import Busy, held, lock_path_for, store_lock_path

_HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kernelwright.run.lock import held
    with held(Path(sys.argv[1]), "test", "holder"):
        print("held", flush=True)
        time.sleep(120)
    """
)


@pytest.fixture
def holder():
    """Start a process that holds the lock at a path; yields a function path -> Popen."""
    started: list[subprocess.Popen] = []

    def hold(path: Path) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", _HOLD, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        started.append(proc)
        return proc

    yield hold
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_held_lock_names_its_holder_and_a_dead_holders_lock_is_free(tmp_path, holder):
    path = lock_path_for(tmp_path)
    proc = holder(path)
    with pytest.raises(Busy) as info, held(path, "run x", "resume"):
        pass
    said = str(info.value)
    assert f"pid {proc.pid} on {socket.gethostname()} since 20" in said and "run x" in said
    os.kill(proc.pid, signal.SIGKILL)  # no cleanup: the kernel frees the flock
    proc.wait()
    with held(path, "run x", "resume"), held(path, "run x", "again"):  # re-entrant in-process
        assert json.loads(path.read_text())["pid"] == os.getpid()


@pytest.fixture
def offline_env(monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_MODEL", "KERNELWRIGHT_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def test_a_second_resume_of_a_run_is_refused_with_who_holds_it(tmp_path, holder, offline_env):
    run_dir = tmp_path / "runs" / "gelu-1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": "gelu-1", "config": {}}))
    (run_dir / "events.jsonl").write_text("")
    proc = holder(lock_path_for(run_dir))
    code, out, err = kw("optimize", "--resume", "gelu-1", "--model", "offline")
    assert code == 2, out + err
    assert f"run gelu-1 is in use by pid {proc.pid}" in err and "since" in err
    assert (run_dir / "events.jsonl").read_text() == ""  # no run.resume written


@pytest.mark.parametrize("command", ["suite", "nightly"])
@pytest.mark.parametrize("which", ["out", "db"])
def test_a_second_suite_or_night_on_one_out_or_db_is_refused(
    tmp_path, holder, offline_env, command, which
):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(TASKS / "gelu.py", tasks)
    out, db = tmp_path / "out", tmp_path / "elsewhere" / "store.db"
    db.parent.mkdir()
    proc = holder(lock_path_for(out) if which == "out" else store_lock_path(db))
    code, printed, err = kw(command, tasks, "--out", out, "--db", db, "--model", "offline")
    assert code == 2, printed + err
    assert f"--{which} " in err and f"in use by pid {proc.pid}" in err
    assert not (out / "suite_state.json").exists() and not list(out.glob("gelu*"))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the read-only mount")
@pytest.mark.parametrize("command", ["optimize", "suite"])
@pytest.mark.parametrize("db", ["inside", "elsewhere"])
def test_a_read_only_out_says_the_directory_is_not_writable(tmp_path, command, db):
    ro = tmp_path / "ro"
    (ro / "runs").mkdir(parents=True)
    package = Path(__file__).resolve().parent.parent
    where = str(package.parent)
    env = {**os.environ, "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KERNELWRIGHT_DB", None)
    env["PYTHONPATH"] = os.pathsep.join([where, env.get("PYTHONPATH", "")])
    target = TASKS / "gelu.py" if command == "optimize" else TASKS
    args = [command, str(target), "--out", str(ro / "runs"), "--model", "offline"]
    if db == "elsewhere":  # the store can be written, the run directories cannot
        args += ["--db", str(tmp_path / "k.db")]
    done = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(ro), str(ro), "--",
         sys.executable, "-m", "kernelwright.cli", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    if "bwrap:" in done.stderr and done.returncode == 1:
        pytest.skip(f"bubblewrap cannot mount here: {done.stderr.strip()}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{ro / 'runs'} is not writable" in done.stderr
    assert "unable to open database file" not in done.stderr
