"""Errors attributed honestly (EvalResult.fault): a task whose reference fails is a task error
(exit 2 from optimize, eval and baseline; a task-error row in a suite), and an evaluator error is
kernelwright's, counted apart from the candidates' failures, failing the suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_support import EXAMPLES, FAST, TASKS, kw

from kernelwright.sandbox.results import EvalResult, fault_of

BROKEN = TASKS / "broken_reference.py"
GOOD = EXAMPLES / "gelu.py"


@pytest.mark.parametrize(
    ("status", "rule", "fault"),
    [
        ("crashed", "evaluator", "evaluator"),  # a bug in the worker or the pool
        ("crashed", "worker-start", "evaluator"),
        ("crashed", "protocol", "evaluator"),
        ("runtime_error", "task", "task"),  # the reference fails at its own shape
        ("error", None, "task"),  # a Baseline whose reference raised
        ("crashed", "signal", "candidate"),  # a segfault in the candidate's kernel
        ("runtime_error", None, "candidate"),
        ("incorrect", "mismatch", "candidate"),
        ("ok", None, "candidate"),
    ],
)
def test_whose_fault_a_verdict_is(status, rule, fault):
    assert fault_of(status, rule) == fault
    if status != "error":
        assert EvalResult(status=status, rule=rule).fault == fault


@pytest.mark.slow
def test_a_task_whose_reference_fails_is_a_task_error(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELWRIGHT_DB", raising=False)
    out = tmp_path / "runs"
    code, printed, err = kw("optimize", BROKEN, "--out", out, *FAST)
    assert code == 2, printed + err
    assert err.startswith("kernelwright: task error: the task's reference fails at its own shape")
    assert err.count("\n") == 1 and "fix the task file" in err
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    run = json.loads((run_dir / "run.json").read_text())
    assert (run["status"], run["stop_reason"], run["best"]) == ("done", "task-error", None)
    assert not list(run_dir.glob("round_*"))  # no candidate was written for a broken task
    assert "the task's reference itself fails" in printed and "reference stays" not in printed
    assert "Task error: the task's reference itself fails" in (run_dir / "report.md").read_text()

    code, printed, err = kw("eval", BROKEN, GOOD, "--trials", "1")
    assert code == 2 and "RUNTIME_ERROR [task]" in printed
    assert "kernelwright: task error: the task's reference fails" in err
    code, printed, err = kw("baseline", BROKEN)
    assert code == 2 and "baseline error" in printed and "task error" in err


@pytest.mark.slow
def test_a_suite_has_a_task_error_row_and_fails(tmp_path):
    out = tmp_path / "suite"
    code, printed, err = kw("suite", BROKEN, "--out", out, "--db", tmp_path / "k.db", *FAST)
    assert code == 1, printed + err
    (row,) = [line.split() for line in printed.splitlines() if line.startswith("broken_reference")]
    assert row[1:3] == ["task-error", "no"]
    assert "task errors: 1 task(s) whose reference itself fails" in printed
    assert "1 task(s) whose reference itself fails (task-error): broken_reference" in err
    summary = json.loads((out / "suite.json").read_text())["summary"]
    assert summary["task_errors"] == 1


def _crashed_run(config, task_path=None, *, resume=None, answer=None, listeners=None, **_):
    """graph.optimize's signature: a finished run whose one candidate met an evaluator error."""
    run_id = f"{Path(task_path).stem}-1"
    for listener in listeners or []:
        listener({"event": "run.start", "run_id": run_id, "task_name": "gelu", "path": ""})
    cand = Path(config.out_dir) / run_id / "round_01" / "cand_1"
    cand.mkdir(parents=True)
    (cand / "kernel.py").write_text(GOOD.read_text())
    internal = EvalResult(status="crashed", rule="evaluator", message="internal evaluator error")
    (cand / "result.json").write_text(internal.to_json())
    run = {"run_id": run_id, "task_name": "gelu", "status": "done", "stop_reason": "exhausted",
           "best": None, "config": config.to_dict()}  # fmt: skip
    (cand.parent.parent / "run.json").write_text(json.dumps(run))
    return run


def test_evaluator_errors_are_a_column_of_their_own_and_fail_the_suite(tmp_path, monkeypatch):
    from kernelwright import graph

    monkeypatch.setattr(graph, "optimize", _crashed_run)
    out = tmp_path / "suite"
    code, printed, err = kw("suite", TASKS / "gelu.py", "--out", out, "--db", tmp_path / "k.db",
                            "--model", "offline")  # fmt: skip
    assert code == 1, printed + err
    header = next(line for line in printed.splitlines() if line.startswith("task "))
    assert "eval errors" in header
    (row,) = [line.split() for line in printed.splitlines() if line.startswith("gelu")]
    assert row[1] == "evaluator-error" and row[-2] == "1"
    assert "evaluator errors: 1 in 1 task(s): kernelwright failed, not the candidates" in printed
    assert "1 evaluator error(s), kernelwright's fault and not the candidates', in gelu" in err
    summary = json.loads((out / "suite.json").read_text())["summary"]
    assert summary["evaluator_errors"] == 1 and summary["correct"] == 0


def test_eval_says_an_evaluator_error_is_not_the_candidates(monkeypatch):
    import kernelwright.sandbox as sandbox

    def crashed(task, source, config):
        return EvalResult(status="crashed", rule="worker-start", message="worker died starting")

    monkeypatch.setattr(sandbox, "evaluate", crashed)
    code, printed, err = kw("eval", TASKS / "gelu.py", GOOD)
    assert code == 1 and "CRASHED [worker-start]" in printed
    assert "internal evaluator error [worker-start]: kernelwright failed, not the candidate" in err


# -- eval and baseline at interpreter sizes -------------------------------------------------------
def _big_gelu(tmp_path: Path) -> Path:
    """tests/tasks/gelu.py at KernelBench's size: 4096 x 393216 fp32 is 6 GiB of input."""
    text = (TASKS / "gelu.py").read_text()
    big = tmp_path / "big_gelu.py"
    big.write_text(
        text.replace("batch_size = 16\n", "batch_size = 4096\n").replace(
            "dim = 2500\n", "dim = 393216\n"
        )
    )
    assert "batch_size = 4096\n" in big.read_text() and "dim = 393216\n" in big.read_text()
    return big


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="the shrink is for the CPU interpreter"
)
@pytest.mark.slow
def test_eval_and_baseline_shrink_a_big_task_on_cpu_and_say_so(tmp_path):
    big = _big_gelu(tmp_path)
    code, printed, err = kw("eval", big, GOOD, "--trials", "1")
    assert code == 0, printed + err
    (line,) = err.splitlines()  # one line: shrunk, to which sizes, why, and how to choose
    assert line.startswith("kernelwright: no CUDA: Triton interpreter, correctness only; task ")
    assert "(from batch_size=4096, dim=393216); --shape NAME=VALUE sets the sizes" in line
    ran = printed.splitlines()[1]
    assert ran.startswith("  ran at: fp32 (precision strict), batch_size=")
    assert ran.endswith("(the task's own: batch_size=4096, dim=393216)")
    result = json.loads(kw("eval", big, GOOD, "--trials", "1", "--json")[1])
    assert result["shape_overrides"] and result["dtype"] == "fp32"
    code, printed, err = kw("baseline", big)
    assert code == 0 and "task shrunk to" in err and "  ran at: fp32" in printed
    # The person's --shape wins over the shrink.
    code, printed, err = kw("eval", big, GOOD, "--trials", "1", "--shape", "batch_size=3",
                            "--shape", "dim=70", "--dtype", "fp16")  # fmt: skip
    assert code == 0, printed + err
    assert "shrunk" not in err and "no CUDA GPU here" in err
    assert "  ran at: fp16 (precision strict), batch_size=3, dim=70 (the task's own:" in printed


@pytest.mark.slow
def test_a_nightly_over_a_task_whose_reference_fails_fails_the_night(tmp_path):
    code, printed, err = kw("nightly", BROKEN, *FAST, "--db", tmp_path / "k.db",
                            "--out", tmp_path / "runs", "--night", "2026-05-01")  # fmt: skip
    assert code == 1, printed + err
    assert "[broken_reference] error: task error: the task's reference fails" in printed
    assert "1 of 1 task(s) regressed or failed: broken_reference" in err
