"""A candidate's copies of the task's size constants, while ModelNew is built at a shape
(sandbox/candidate/process.py `bind_sizes`)."""

from __future__ import annotations

from pathlib import Path

from kernelwright.sandbox import EvalConfig, evaluate
from kernelwright.sandbox.candidate.process import _globals_read, _same_size
from kernelwright.sandbox.task import load_task, task_namespace

HERE = Path(__file__).resolve().parent
TASK = HERE / "tasks" / "init_sized_state.py"
HONEST = (HERE / "candidates" / "init_size_copy_rnn.py").read_text()
CONFIG = EvalConfig(timing=False, compile_baseline=False)


def test_a_constructor_sized_by_a_copied_constant_is_accepted_at_every_shape():
    """The task's Model reads batch_size in __init__; at the other shape (and at a --shape) the
    reference's namespace holds the new value, and now the candidate's copy does too."""
    result = evaluate(TASK, HONEST, CONFIG)
    assert result.status == "ok", result.summary()
    assert result.correctness.variant_checked, result.summary()
    assert {"batch_size": 8} in [
        {"batch_size": s.get("batch_size")} for s in result.correctness.shapes
    ]
    assert any(s.get("batch_size") != 8 for s in result.correctness.shapes)
    other = evaluate(
        TASK, HONEST, EvalConfig(timing=False, compile_baseline=False, shapes={"batch_size": 5})
    )
    assert other.status == "ok", other.summary()


def test_a_forward_that_reads_a_size_constant_is_still_caught_by_the_other_shape():
    source = HONEST.replace(
        "return self.h2o(self.hidden)", "return self.h2o(self.hidden).reshape(batch_size, -1)"
    )
    result = evaluate(TASK, source, CONFIG)
    assert result.status == "runtime_error", result.summary()  # reshape(8, -1) of 7 rows
    assert "while the other shape batch_size=7" in result.message


def test_only_constants_models_constructor_reads_are_bound():
    """A constant Model's constructor does not read (input_size: it arrives as an argument) is
    left at the file's value, so a constructor that captures it is caught as before."""
    source = (
        HONEST.replace(
            "self.h2o = nn.Linear(hidden_size, output_size)",
            "self.h2o = nn.Linear(hidden_size, output_size)\n        self.rows = _rows()",
        )
        .replace("class ModelNew", "def _rows():\n    return input_size\n\n\nclass ModelNew")
        .replace(
            "combined = torch.cat((x, self.hidden), dim=1)",
            "combined = torch.cat((x[:, : self.rows], self.hidden), dim=1)",
        )
    )
    # ok at the task's sizes and at the other shape, whose narrower x[:, :32] leaves whole
    assert evaluate(TASK, source, CONFIG).status == "ok"
    shrunk = EvalConfig(timing=False, compile_baseline=False, shapes={"input_size": 48})
    result = evaluate(TASK, source, shrunk)
    assert result.status != "ok", result.summary()


def test_what_counts_as_a_copy():
    ns = task_namespace(load_task(TASK))
    assert {"batch_size", "torch", "nn"} <= _globals_read(ns["Model"].__init__)
    assert "hidden_size" not in _globals_read(ns["Model"].__init__)  # an argument, an attribute
    assert _same_size(8, 8) and _same_size((2, [3, 4]), (2, [3, 4]))
    assert not _same_size(True, 1) and not _same_size(8.0, 8) and not _same_size((2,), (2, 3))

    class Liar(int):
        def __eq__(self, other):  # never called: a copy is an int by type
            raise AssertionError

    assert not _same_size(Liar(8), 8)
