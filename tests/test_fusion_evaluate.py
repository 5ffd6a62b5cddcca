"""Every candidate the codegen writes for the test tasks is accepted by the evaluator (Triton
interpreter on CPU): correctness over fresh seeds, the other-shape variant, drift, anti-cheat."""

from __future__ import annotations

import pytest
from test_fusion_api import GENERATED
from test_fusion_harness import task_path

from kernelwright.agents.fusion import generate
from kernelwright.sandbox import EvalConfig, evaluate


@pytest.mark.parametrize("name", GENERATED)
def test_evaluator_accepts(name):
    result = generate(task_path(name))
    assert result.ok, result.reason
    verdict = evaluate(task_path(name), result.source, EvalConfig(trials=2, drift_calls=2))
    assert verdict.status == "ok", f"{verdict.status} {verdict.rule}: {verdict.message}"
