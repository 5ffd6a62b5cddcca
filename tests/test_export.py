"""`kernelwright export RUN --to FILE.py`: the winner with its tuned constants as a standalone
module (imported with kernelwright unimportable and run against the task's Model), and a
one-line refusal when the run has no verified winner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_cli_support import EXAMPLES, TASKS, check_standalone, kw

from kernelwright.commands.export import RUNS_ON, foreign_imports
from kernelwright.sandbox.results import EvalResult, Timings

GOOD = (EXAMPLES / "gelu.py").read_text()
TUNED = GOOD.replace("BLOCK_SIZE = 1024  #", "BLOCK_SIZE = 512  #")


def make_run(out: Path, run_id: str, *, best: bool, header: str = "") -> Path:
    """A finished run directory as the agents write it: one candidate, tuned by the sweep."""
    run_dir = out / run_id
    cand = run_dir / "round_01" / "cand_1"
    cand.mkdir(parents=True)
    ok = EvalResult(status="ok", task="gelu", timings=Timings(meaningful=False))
    (cand / "kernel.py").write_text(GOOD)
    (cand / "result.json").write_text(ok.to_json())
    (cand / "tuned.py").write_text(TUNED)
    (cand / "tuned_result.json").write_text(ok.to_json())
    block = {"round": 1, "candidate": 1, "path": "best.py", "tuned": {"BLOCK_SIZE": 512}}
    if best:
        (run_dir / "best.py").write_text(header + TUNED)
    run = {
        "run_id": run_id,
        "task_name": "gelu",
        "status": "done",
        "best": block if best else None,
        "config": {"dtype": "fp32"},
        "environment": {"gpu": "", "torch": "2.x", "triton": "3.x"},
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


@pytest.mark.slow
def test_export_writes_the_tuned_winner_as_a_standalone_module(tmp_path):
    assert "BLOCK_SIZE = 1024  #" in GOOD  # the example the tuned variant is made from
    make_run(tmp_path / "runs", "gelu-1", best=True)
    target = tmp_path / "out" / "gelu_kernel.py"
    code, out, err = kw("export", "gelu-1", "--out", tmp_path / "runs", "--to", target)
    assert code == 0, err
    assert out == (
        f"wrote {target}: ModelNew of run gelu-1 (round_01/cand_1), constants BLOCK_SIZE=512\n"
        f"runs on: {RUNS_ON}\n"
    )
    text = target.read_text()
    assert text.startswith("# Exported by kernelwright from run gelu-1 (round_01/cand_1)")
    assert "Tuned launch constants: BLOCK_SIZE=512." in text
    assert TUNED.rstrip() + "\n" in text and "BLOCK_SIZE = 512  # tune:" in text
    assert "# Forward only: its kernels define no backward; backward() through an output" in text
    assert text.rstrip().endswith(
        "return _KwForwardOnly.apply(lambda: run(*args, **kwargs), *watched)"
    )
    check_standalone(target, TASKS / "gelu.py", {"batch_size": 4, "dim": 300}, tmp_path)


def test_export_accepts_a_run_directory_path(tmp_path):
    run_dir = make_run(tmp_path / "elsewhere", "gelu-2", best=True)
    code, _, err = kw("export", run_dir, "--to", tmp_path / "k.py")
    assert code == 0, err
    assert TUNED.rstrip() + "\n" in (tmp_path / "k.py").read_text()


def test_run_without_a_verified_winner_says_so_and_exits_1(tmp_path):
    make_run(tmp_path / "runs", "gelu-3", best=False)
    target = tmp_path / "k.py"
    code, out, err = kw("export", "gelu-3", "--out", tmp_path / "runs", "--to", target)
    assert (code, out) == (1, "")
    assert err == (
        "kernelwright: run gelu-3 has no verified winner (the reference stays): nothing to export\n"
    )
    assert not target.exists()


@pytest.mark.parametrize(
    ("source", "foreign"),
    [
        ("import torch\nimport triton.language as tl\nfrom math import sqrt\n", []),
        ("from __future__ import annotations\nimport typing\n", []),
        ("import torch\nfrom kernelwright.agents import fusion\n", ["kernelwright"]),
        ("import numpy as np\nfrom . import helpers\n", [".", "numpy"]),
    ],
)
def test_foreign_imports(source, foreign):
    assert foreign_imports(source) == foreign


def test_best_py_and_the_export_say_forward_only_once(tmp_path):
    from kernelwright.run.rundir import BEST_PY_HEADER

    assert "Forward only" in BEST_PY_HEADER and "reference Model" in BEST_PY_HEADER
    make_run(tmp_path / "runs", "gelu-4", best=True, header=BEST_PY_HEADER)
    target = tmp_path / "k.py"
    code, _, err = kw("export", "gelu-4", "--out", tmp_path / "runs", "--to", target)
    assert code == 0, err
    text = target.read_text()
    assert BEST_PY_HEADER not in text and text.count("Forward only") == 1
    assert "# Exported by kernelwright" in text.split(TUNED.rstrip())[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="what the module says where CUDA is missing")
def test_the_exported_module_without_cuda_says_to_set_triton_interpret(tmp_path):
    # issue 25: it failed with Triton's raw "0 active drivers ([]). There should only be one."
    make_run(tmp_path / "runs", "gelu-5", best=True)
    target = tmp_path / "where" / "exported.py"
    code, out, err = kw("export", "gelu-5", "--out", tmp_path / "runs", "--to", target)
    assert code == 0, err
    assert "runs on: a CUDA GPU; on CPU only with TRITON_INTERPRET=1" in out
    assert "# Runs on: a CUDA GPU; on CPU only with TRITON_INTERPRET=1" in target.read_text()
    (target.parent / "task.py").write_text((TASKS / "gelu.py").read_text())
    script = (
        "import exported, task, torch\n"
        "model = exported.ModelNew(*task.get_init_inputs())\n"
        "model(torch.randn(4, 8))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TRITON_INTERP"))}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=target.parent,
        env={**env, "PYTHONPATH": str(target.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: kernelwright: this ModelNew's Triton kernels run on a")
    assert "set TRITON_INTERPRET=1 before importing this module" in last
    assert "There should only be one" not in done.stderr
