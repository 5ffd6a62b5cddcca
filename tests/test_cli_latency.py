"""The store's commands answer in well under a second (issue 25): they read SQLite and print,
and must not load torch (2-5 s on a small machine) through the task loader. Checked by what a
fresh process imported, not by a clock a loaded CI box would make flaky."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelwright.store import Store

_PROBE = """
import contextlib, io, json, sys
from kernelwright import cli
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    code = cli.main(sys.argv[1:])
heavy = sorted(m for m in ("torch", "triton", "matplotlib", "langgraph") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy, "said": out.getvalue()[-300:]}))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["runs"],
        ["history", "gelu"],  # a task the store does not know: refused
        ["promote", "nope-1"],  # a run that is not there: refused
        ["revert", "gelu"],
        ["report"],
        ["metrics", "--out", "{tmp}/metrics"],
    ],
    ids=lambda a: a[0],
)
def test_store_commands_load_no_torch(tmp_path, args):
    db = tmp_path / "store.db"
    Store(str(db)).close()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args] + ["--db", str(db)]
    if args[0] not in ("metrics",):
        argv += ["--out", str(tmp_path / "runs")]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["code"] in (0, 1, 2), probe
    assert probe["heavy"] == [], f"{args[0]} loaded {probe['heavy']}: {probe['said']}"
