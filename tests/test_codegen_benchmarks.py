"""The codegen over the benchmark suite: a candidate or an honest reason for every task, never an
exception; every candidate passes the static checks and, at shrunk sizes under the interpreter,
the evaluator (no incorrect emission)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.codegen import generate
from kernelwright.sandbox import EvalConfig, evaluate
from kernelwright.sandbox.rules import format_violations
from kernelwright.sandbox.static.check import static_check
from kernelwright.sandbox.task import load_task, shrink_overrides

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
TASKS = sorted((ROOT / "benchmarks").glob("level*/*.py"))
# Bytes of inputs the interpreter runs the benchmark tasks at (their real sizes are for an H200).
SHRUNK_BYTES = 2**16


def test_coverage_report(capsys, request):
    """Every task gets a candidate or an honest reason; with -v, the per-task list is printed
    (under -q it would be 64 lines among the dots)."""
    if not TASKS:
        pytest.skip("no benchmark tasks yet")
    rows, made = [], 0
    for path in TASKS:
        result = generate(str(path))
        assert "internal error" not in result.reason, f"{path.name}: {result.reason}"
        made += result.ok
        what = "; ".join(result.groups) if result.ok else result.reason
        rows.append(f"{path.parent.name}/{path.name}: {what}")
    if request.config.getoption("verbose") > 0:
        with capsys.disabled():
            print(f"\nfusion coverage: {made}/{len(TASKS)} tasks get a candidate")
            print("\n".join(rows))
    assert made > 0


@pytest.mark.parametrize("path", TASKS, ids=[f"{p.parent.name}/{p.stem}" for p in TASKS])
def test_candidate_accepted_at_shrunk_size(path):
    result = generate(str(path))
    if not result.ok:
        pytest.skip(result.reason)
    violations = static_check(result.source)
    assert not violations, format_violations(violations)
    shapes = shrink_overrides(load_task(path), SHRUNK_BYTES)
    verdict = evaluate(str(path), result.source, EvalConfig(shapes=shapes, trials=1, drift_calls=1))
    assert verdict.status == "ok", f"{verdict.status} {verdict.rule}: {verdict.message}"
