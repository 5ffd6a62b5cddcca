"""Every parse in the package goes through sandbox/static/pyparse.py's lock (CPython 3.11 AST
race)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from kernelwright.sandbox.static import pyparse

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = [
    p
    for d in ("sandbox", "agents", "codegen", "run", "commands", "report")
    for p in (ROOT / d).rglob("*.py")
]
PACKAGE += [ROOT / n for n in ("graph.py", "cli.py", "store.py", "decisions.py")]


def _direct_parses(path: Path) -> list[int]:
    """Lines calling ast.parse(...) or compile(<tree>, ...) directly."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "parse"
            and getattr(f.value, "id", "") == "ast"
        ):
            lines.append(node.lineno)
        if isinstance(f, ast.Name) and f.id == "compile" and node.args:
            lines.append(node.lineno)
    return lines


def test_no_module_parses_outside_the_lock():
    offenders = {
        str(p.relative_to(ROOT)): _direct_parses(p)
        for p in PACKAGE
        if p.name != "pyparse.py" and _direct_parses(p)
    }
    assert offenders == {}


def test_parses_are_serialised():
    inside, overlap = [], []
    original = ast.parse

    def slow_parse(*args, **kwargs):
        inside.append(1)
        if len(inside) > 1:
            overlap.append(1)
        threading.Event().wait(0.01)
        inside.pop()
        return original(*args, **kwargs)

    ast.parse = slow_parse
    try:
        threads = [threading.Thread(target=pyparse.parse, args=("x = 1",)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        ast.parse = original
    assert not overlap


# A fresh interpreter (lazy imports parse only once per process) runs a two-job offline suite and
# records every ast.parse made in a job thread without the lock: library parses included
# (torch._dynamo's first import on a meta-tensor op, LangGraph's inspect.signature, matplotlib).
SUITE_SPY = r"""
import ast, json, sys, threading, traceback
from kernelwright.sandbox.static import pyparse

unlocked = []
original = ast.parse

def spy(*args, **kwargs):
    in_job = threading.current_thread() is not threading.main_thread()
    if in_job and not pyparse._LOCK._is_owned():
        stack = traceback.extract_stack()
        ours = [f"{f.filename}:{f.lineno}" for f in stack if "-packages" not in f.filename]
        unlocked.append(" <- ".join(reversed(ours[-4:])))
    return original(*args, **kwargs)

ast.parse = spy
from kernelwright import cli
code = cli.main(sys.argv[1:])
print(json.dumps({"code": code, "unlocked": sorted(set(unlocked))}))
"""


@pytest.mark.slow
def test_a_suites_job_threads_parse_only_under_the_lock(tmp_path):
    import json
    import os
    import subprocess
    import sys

    tasks = ROOT / "tests" / "tasks"
    args = ["suite", str(tasks / "gelu.py"), str(tasks / "softmax.py"), "--jobs", "2"]
    args += ["--model", "offline", "--trials", "1", "--out", str(tmp_path / "out")]
    args += ["--db", str(tmp_path / "k.db")]
    env = {k: v for k, v in os.environ.items() if k != "KERNELWRIGHT_DB"}
    done = subprocess.run(
        [sys.executable, "-c", SUITE_SPY, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert report["unlocked"] == []
