"""`kernelwright export RUN --to FILE.py --guard`: the winner behind the runtime guard, with the
task's Model as its reference and the envelope of the shapes the evaluator verified written in;
imported in a fresh process and called inside and outside that envelope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from test_cli_support import EXAMPLES, TASKS, kw

import kernelwright
from kernelwright.commands.export import RUNS_ON
from kernelwright.sandbox.results import Correctness, EvalResult, Timings

GOOD = (EXAMPLES / "gelu.py").read_text()
# The evaluator's record: the task's sizes and a variant where batch_size differs, dim not.
SHAPES = ({"batch_size": 4, "dim": 300}, {"batch_size": 5, "dim": 300})


def make_run(out: Path, run_id: str) -> Path:
    run_dir = out / run_id
    cand = run_dir / "round_01" / "cand_1"
    cand.mkdir(parents=True)
    ok = EvalResult(
        status="ok",
        task="gelu",
        timings=Timings(meaningful=False),
        correctness=Correctness(trials=2, shapes=SHAPES, variant_checked=True),
    )
    (cand / "kernel.py").write_text(GOOD)
    (cand / "result.json").write_text(ok.to_json())
    (run_dir / "best.py").write_text(GOOD)
    (run_dir / "task.py").write_text((TASKS / "gelu.py").read_text())
    run = {
        "run_id": run_id,
        "task_name": "gelu",
        "status": "done",
        "best": {"round": 1, "candidate": 1, "path": "best.py", "tuned": {}},
        "config": {"dtype": "fp32"},
        "environment": {"gpu": "", "torch": "2.x", "triton": "3.x"},
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


USE = """
import json, logging, torch
import exported
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(json.loads(record.getMessage()))
logging.getLogger("kernelwright.runtime").addHandler(Keep())
logging.getLogger("kernelwright.runtime").setLevel(logging.INFO)
m = exported.ModelNew()
assert isinstance(m, exported._KwGuard), type(m)
ref = exported._KW_REFERENCE.Model()
x = torch.randn(7, 300) * 3  # batch 7: never verified, but batch is "any"
out = m(x)
assert torch.allclose(out, ref(x), atol=1e-4, rtol=1e-4)
m(torch.randn(3, 301))  # dim 301: outside
m(torch.randn(3, 300, dtype=torch.float64))  # fp64: outside
s = m.stats()
print(json.dumps({k: s[k] for k in ("calls", "out_of_envelope", "fallbacks", "falling_back",
    "name", "version")}))
print(json.dumps([r["reason"] for r in records if r["event"] == "out-of-envelope"]))
"""


def test_export_guard_writes_the_reference_and_the_verified_envelope(tmp_path):
    make_run(tmp_path / "runs", "gelu-g")
    target = tmp_path / "exported.py"
    code, out, err = kw("export", "gelu-g", "--out", tmp_path / "runs", "--to", target, "--guard")
    assert code == 0, err
    assert out == (
        f"wrote {target}: ModelNew of run gelu-g (round_01/cand_1) behind the runtime guard, "
        "constants as written\n"
        f"runs on: {RUNS_ON}\n"
    )
    text = target.read_text()
    assert "# Guarded: needs torch, triton and kernelwright" in text
    assert "'shape': [None, 300], 'device': 'cpu'" in text  # batch varied, dim did not
    assert "batch_size=4, dim=300; batch_size=5, dim=300" in text
    assert "'dtype': 'fp32'" in text and "'version': 'gelu-g'" in text
    # The exported module beside the script, kernelwright as this process imports it (the
    # directory holding the package; an editable install finds it anyway). TRITON_INTERPRET
    # travels in os.environ (conftest.py sets it without CUDA).
    where = [str(tmp_path), str(Path(kernelwright.__file__).parent.parent)]
    env = os.environ | {"PYTHONPATH": os.pathsep.join([*where, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(USE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stats_line, reasons_line = done.stdout.strip().splitlines()[-2:]
    assert json.loads(stats_line) == {
        "calls": 3,
        "out_of_envelope": 2,
        "fallbacks": 2,
        "falling_back": None,
        "name": "gelu",
        "version": "gelu-g",
    }
    reasons = json.loads(reasons_line)
    assert reasons == [
        "input 0 has shape (3, 301), verified as (*, 300)",
        "input 0 is float64, verified as float32",
    ]
