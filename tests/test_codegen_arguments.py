"""Constructor arguments that are not sizes (codegen/arguments.py): a candidate reads them from
the module at run time where they bind, and otherwise refuses another value at construction;
it is never silently wrong for `ModelNew(*other_args)`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_codegen_harness import DEVICE, TASKS, candidate_module, check_equal, check_ruff

from kernelwright.codegen import generate
from kernelwright.codegen.arguments import fixed_arguments
from kernelwright.sandbox.task import load_task, task_namespace

TASK = TASKS / "fusion_scale_clamp.py"
SHAPES = [{}, {"batch_size": 5, "features": 77}]


def _module(source: str, tmp_path: Path):
    check_ruff(source, tmp_path)
    return candidate_module(source, tmp_path)


def _run_both(ns, module, init_args):
    torch.manual_seed(0)
    x = ns["get_inputs"]()[0].to(DEVICE)
    with torch.no_grad():
        return module.ModelNew(*init_args)(x), ns["Model"](*init_args)(x)


@pytest.mark.parametrize("sizes", SHAPES, ids=["task", "other"])
def test_scales_and_clamps_are_read_at_run_time(tmp_path, sizes):
    result = generate(str(TASK))
    assert result.ok, result.reason
    assert "* 2.0" not in result.source and "1.5)" not in result.source
    module = _module(result.source, tmp_path)
    ns = task_namespace(load_task(TASK), sizes)
    features = ns["features"]
    for args in ([features, 2.0, -1.0, 1.5, 1], [features, -3.25, -0.5, 0.75, 1]):
        out, ref = _run_both(ns, module, args)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


def test_an_axis_is_checked_at_construction(tmp_path):
    module = _module(generate(str(TASK)).source, tmp_path)
    with pytest.raises(ValueError, match=r"generated for dim=1, not 0"):
        module.ModelNew(200, 2.0, -1.0, 1.5, 0)


def test_a_scale_no_attribute_holds_is_checked_at_construction(tmp_path):
    # `self.scaling_factor * 4` is computed in Python while tracing: a constant no attribute
    # holds, so the scale cannot be read at run time and another one is refused.
    source = TASK.read_text().replace(
        "x = x * self.scaling_factor + self.inv", "x = x * (self.scaling_factor * 4) + self.inv"
    )
    path = tmp_path / "derived.py"
    path.write_text(source)
    result = generate(str(path))
    assert result.ok, result.reason
    module = _module(result.source, tmp_path)
    ns = task_namespace(load_task(path))
    for sizes in SHAPES:
        ns = task_namespace(load_task(path), sizes)
        out, ref = _run_both(ns, module, [ns["features"], 2.0, -1.0, 1.5, 1])
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match=r"generated for scaling_factor=2\.0, not 3\.0"):
        module.ModelNew(200, 3.0, -1.0, 1.5, 1)


def test_arguments_that_follow_a_size_constant_are_left_to_the_variants():
    task = load_task(TASK)
    names = [a.name for a in fixed_arguments(task, task_namespace(task))]
    assert names == ["scaling_factor", "clamp_min", "clamp_max", "dim"]  # not features


def test_an_init_with_lines_too_long_is_copied_wrapped_as_ruff_wraps_it(tmp_path):
    # Level 3 writes nested constructors on one line; six of its first 25 tasks got no
    # candidate for "a line too long to copy formatted".
    src = check_equal("long_init", tmp_path, [{}, {"batch_size": 3, "in_features": 20}])
    assert "    def __init__(\n        self, in_features, hidden_features, out_features, neg" in src
    assert "        self.body = nn.Sequential(\n            nn.Linear(in_features, hidden_" in src


def test_an_init_line_no_rule_wraps_is_copied_as_its_author_wrote_it(tmp_path):
    # A long string cannot be split at brackets: the candidate keeps the author's lines (their
    # comments too) instead of refusing the task, and still matches Model.
    src = check_equal("init_as_written", tmp_path, [{}, {"batch_size": 3}], ruff=False)
    assert "        super().__init__()  # noqa: UP008 (the author writes it so" in src
    assert '        self.note = "a string literal this long is written as its author' in src
