"""What `runs` and run.json say about a run is what happened to it: a run stopped by a closed
pipe (`| head`), Ctrl-C or a kill -9 reads as interrupted and resumes; `runs --out X` lists X's
runs only, whatever store sits beside it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_cli_support import FAST, TASKS, kw

from kernelwright.run.owner import run_owner, run_status
from kernelwright.store import Store

ROOT = Path(__file__).resolve().parent.parent


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(done.stdout)


def write_run(out: Path, run_id: str, **fields) -> Path:
    run_dir = out / run_id
    run_dir.mkdir(parents=True)
    run = {"run_id": run_id, "task_name": "gelu", "created": "2026-01-01T00:00:00",
           "status": "running", "config": {"out_dir": str(out)}, **fields}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_a_running_run_whose_process_is_gone_reads_as_interrupted(tmp_path):
    here = socket.gethostname()
    dead = {"host": here, "pid": _dead_pid(), "started": "1"}
    assert run_status({"status": "running", "owner": dead}) == "interrupted"
    # Alive (this process), or on another machine (nothing to tell): still running.
    assert run_status({"status": "running", "owner": run_owner()}) == "running"
    assert run_status({"status": "running", "owner": {**dead, "host": "elsewhere"}}) == "running"
    # A recycled pid: alive, but started at another time than the run's process.
    if Path("/proc/self/stat").is_file():
        recycled = {**run_owner(), "started": "0"}
        assert run_status({"status": "running", "owner": recycled}) == "interrupted"
    assert run_status({"status": "done", "owner": dead}) == "done"
    assert run_status({}) == "?"

    write_run(tmp_path / "runs", "gelu-killed", owner=dead)
    code, out, _ = kw("runs", "--out", tmp_path / "runs")
    assert code == 0
    (row,) = [line for line in out.splitlines() if line.startswith("gelu-killed")]
    assert "interrupted (resumable)" in row
    assert f"kernelwright optimize --resume RUN_ID --out {tmp_path / 'runs'}" in out


def test_runs_lists_its_own_out_directory_only(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELWRIGHT_DB", raising=False)
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    write_run(mine, "gelu-mine", status="done")
    write_run(theirs, "gelu-theirs", status="done")
    # A store shared on purpose knows both directories' runs, one of them deleted since.
    shared = Store(tmp_path / "shared.db")
    for run_id, out in (("gelu-theirs", theirs), ("gelu-gone", mine), ("gelu-far", theirs)):
        config = {"out_dir": str(out)}
        shared.record_run(run_id, task_path="t.py", task_name="gelu", task_hash="h",
                          config=config, status="done")  # fmt: skip
    code, out, _ = kw("runs", "--out", mine, "--db", tmp_path / "shared.db")
    listed = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    assert code == 0 and sorted(listed) == ["gelu-gone", "gelu-mine"]
    code, out, _ = kw("runs", "--out", theirs)  # its own default store: none yet
    listed = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    assert code == 0 and listed == ["gelu-theirs"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter run; the path is the same")
@pytest.mark.slow
def test_a_closed_pipe_stops_the_run_resumable_and_without_a_traceback(tmp_path):
    out = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "KERNELWRIGHT"))}
    env["KERNELWRIGHT_CACHE_DIR"] = str(tmp_path / "cache")
    cmd = [sys.executable, "-m", "kernelwright.cli", "optimize", str(TASKS / "gelu.py"),
           "--out", str(out), *FAST]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    first = [proc.stdout.readline(), proc.stdout.readline()]  # what `| head -2` reads
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err  # 128 + SIGPIPE, as `head` leaves a writer
    assert first[0].startswith("run gelu-")
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert "stopped: the output was closed (broken pipe)" in err
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    run = json.loads((run_dir / "run.json").read_text())
    assert (run["status"], run.get("error")) == ("interrupted", None)
    assert f"kernelwright optimize --resume {run['run_id']}" in err
    code, printed, err = kw("optimize", "--resume", run["run_id"], "--out", out, *FAST)
    assert code == 0, printed + err
    assert json.loads((run_dir / "run.json").read_text())["status"] == "done"


def test_a_listing_into_a_closed_pipe_ends_quietly(tmp_path):
    """`kernelwright runs | head -1`: exit 141 as a writer killed by SIGPIPE, and nothing on
    stderr (no BrokenPipeError from the interpreter's exit flush)."""
    cmd = [sys.executable, "-m", "kernelwright.cli", "runs", "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    proc.stdout.close()  # the reader is gone before the listing is written
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == ""
