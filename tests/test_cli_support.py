"""Helpers shared by the CLI tests: in-process `kernelwright` calls, offline runs, and a check
that an exported module works with nothing but torch and triton. (No tests here.)"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kernelwright import cli

TASKS = Path(__file__).parent / "tasks"
EXAMPLES = Path(__file__).parent.parent / "prompts" / "examples"
# The cheapest offline search that still goes through every node and the real evaluator.
FAST = ["--model", "offline", "--trials", "1", "--workers", "1"]


def kw(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """`kernelwright ARGS` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main([str(a) for a in args])
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def offline_run(out: Path, db: Path, task: str = "gelu") -> dict:
    """An offline `kernelwright optimize` of tests/tasks/<task>.py; its run.json plus "dir"."""
    before = set(out.iterdir()) if out.is_dir() else set()
    code, printed, err = kw("optimize", TASKS / f"{task}.py", "--out", out, "--db", db, *FAST)
    assert code == 0, printed + err
    (run_dir,) = set(out.iterdir()) - before
    return {**json.loads((run_dir / "run.json").read_text()), "dir": run_dir}


# Imports the exported module with kernelwright unimportable (a meta-path finder refuses it, so
# neither PYTHONPATH nor the editable install can supply it), builds ModelNew like the task's
# Model, runs both under the Triton interpreter and compares.
_STANDALONE = """
import importlib, sys
class NoKernelwright:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "kernelwright":
            raise ImportError("kernelwright must not be needed")
sys.meta_path.insert(0, NoKernelwright())
import torch
exported = importlib.import_module("exported")
task = importlib.import_module("task")
for name, value in SIZES.items():
    setattr(task, name, value)
torch.manual_seed(0)
init = task.get_init_inputs()
model, new = task.Model(*init), exported.ModelNew(*init)
new.load_state_dict(model.state_dict())
inputs = task.get_inputs()
torch.testing.assert_close(new(*inputs), model(*inputs), atol=1e-4, rtol=1e-4)
# Forward only: backward() says so and points to the reference, instead of autograd's
# "element 0 of tensors does not require grad".
wanting = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
out = new(*wanting)
out = out[0] if isinstance(out, (tuple, list)) else out
try:
    out.sum().backward()
except RuntimeError as e:
    assert "forward-only" in str(e) and "reference Model" in str(e), e
else:
    raise AssertionError("backward() through the exported kernel did not fail")
with torch.no_grad():
    torch.testing.assert_close(new(*wanting), model(*inputs), atol=1e-4, rtol=1e-4)
assert not [m for m in sys.modules if m.startswith("kernelwright")]
print("standalone ok")
"""


def check_standalone(module: Path, task_file: Path, sizes: dict, tmp: Path) -> None:
    """Fail unless `module` runs as the task's Model with only torch and triton importable."""
    where = tmp / "standalone"
    where.mkdir()
    (where / "exported.py").write_text(module.read_text())
    (where / "task.py").write_text(task_file.read_text())
    script = textwrap.dedent(_STANDALONE).replace("SIZES", repr(dict(sizes)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KERNELWRIGHT"))} | {
        "PYTHONPATH": str(where),
        "TRITON_INTERPRET": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "standalone ok" in done.stdout
