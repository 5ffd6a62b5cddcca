"""generate()'s contract: a FusionResult with a candidate the evaluator accepts, or a reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_codegen_harness import TASKS, task_path

from kernelwright.codegen import FusionResult, generate
from kernelwright.sandbox.rules import format_violations
from kernelwright.sandbox.static import static_check
from kernelwright.sandbox.task import load_task

GENERATED = sorted(
    p.stem.removeprefix("fusion_")
    for p in TASKS.glob("fusion_*.py")
    if p.stem not in ("fusion_untraceable", "fusion_pool_only")
)


def test_untraceable_model_gets_a_reason():
    result = generate(task_path("untraceable"))
    assert result.source is None and not result.ok
    assert result.reason.startswith("no offline candidate: torch.fx cannot trace Model.forward")
    assert "line 12" in result.reason


def test_nothing_to_fuse_gets_a_reason():
    result = generate(task_path("pool_only"))
    assert result.source is None
    assert result.reason == "no offline candidate: nothing to fuse: forward is only maxpool2d"


def test_result_fields_and_tunables():
    result = generate(load_task(task_path("linear_gelu")))  # a sandbox Task works too
    assert isinstance(result, FusionResult) and result.ok
    assert result.groups == ("matmul: linear -> gelu -> mul -> add",)
    assert set(result.tunables) >= {"MATMUL_BLOCK_M", "MATMUL_TF32X3"}
    for name, choices in result.tunables.items():
        line = re.search(rf"^{name} = (\d+)  # tune: (.*)$", result.source, re.M)
        assert line, name
        assert tuple(int(v) for v in line.group(2).split(", ")) == choices
        assert int(line.group(1)) in choices


def test_fp16_tiles_differ():
    fp32 = generate(task_path("linear_gelu")).source
    fp16 = generate(task_path("linear_gelu"), dtype="fp16").source
    assert "MATMUL_BLOCK_M = 64" in fp32 and "MATMUL_BLOCK_M = 128" in fp16


@pytest.mark.parametrize("name", GENERATED)
def test_candidate_passes_static_checks(name):
    result = generate(task_path(name))
    assert result.ok, result.reason
    violations = static_check(result.source)
    assert not violations, format_violations(violations)
    assert "Model(" not in result.source.replace("ModelNew(", "")


def test_a_size_baked_into_forward_is_refused(tmp_path: Path):
    source = (TASKS / "fusion_softmax.py").read_text()
    baked = source.replace(
        "torch.softmax(x * self.scale, dim=-1)",
        "torch.softmax(x.view(batch_size, dim) * self.scale, dim=-1)",
    )
    path = tmp_path / "baked.py"
    path.write_text(baked)
    result = generate(str(path))
    assert result.source is None
    assert "depends on the task's constants" in result.reason
