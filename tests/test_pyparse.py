"""Every parse in the package goes through sandbox/pyparse.py's lock (CPython 3.11 AST race)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from kernelwright.sandbox import pyparse

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = [p for d in ("sandbox", "agents") for p in (ROOT / d).rglob("*.py")]
PACKAGE += [ROOT / n for n in ("graph.py", "cli.py", "store.py", "report.py")]


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
