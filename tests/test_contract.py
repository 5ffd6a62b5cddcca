"""Tests of sandbox/contract.py: every statement of the candidate contract takes it from there."""

from __future__ import annotations

import typing

import torch

from kernelwright.agents import coder
from kernelwright.commands import export
from kernelwright.run import config
from kernelwright.sandbox import contract, rules, task
from kernelwright.sandbox.config import EvalConfig
from kernelwright.sandbox.judge import compare
from kernelwright.sandbox.static import check as static
from kernelwright.sandbox.static.check import static_check


def test_dtype_names_map_to_torch_dtypes():
    assert contract.DTYPE_NAMES == ("fp32", "fp16", "bf16")
    assert contract.torch_dtypes() == {
        "fp32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }
    assert contract.torch_dtypes() == task.DTYPES


def test_configs_and_comparison_take_the_names_from_the_contract():
    hints = typing.get_type_hints(EvalConfig)
    assert typing.get_args(hints["dtype"]) == contract.DTYPE_NAMES
    assert typing.get_args(hints["precision"]) == contract.PRECISION_POLICIES
    run_hints = typing.get_type_hints(config.RunConfig)
    assert typing.get_args(run_hints["dtype"]) == contract.DTYPE_NAMES
    assert typing.get_args(run_hints["precision"]) == contract.PRECISION_POLICIES
    assert compare.POLICIES == contract.PRECISION_POLICIES == ("strict", "tf32-ok")


def test_static_check_export_and_prompt_agree_on_allowed_imports():
    assert static._ALLOWED_ROOTS == contract.ALLOWED_ROOTS == export.STANDALONE_IMPORTS
    for name in contract.ALLOWED_IMPORTS:
        assert name in coder.ALLOWED_IMPORTS
        assert name in rules.RULES["import"]
        source = (
            f"import {name}\n" if name != "__future__" else "from __future__ import annotations\n"
        )
        assert not [v for v in static_check(source) if v.rule == "import"], name
    assert [v.rule for v in static_check("import os\n")][:1] == ["import"]


def import_rules(source: str) -> list[int]:
    """The lines with an `import` violation."""
    return [v.line for v in static_check(source) if v.rule == "import"]


def test_limited_modules_are_stated_where_the_coder_reads_them():
    # logging, warnings and contextlib: allowed for a few names, which the prompt says.
    assert set(contract.LIMITED_IMPORTS) <= set(contract.ALLOWED_IMPORTS)
    for name, (names, why) in contract.LIMITED_IMPORTS.items():
        assert contract.IMPORTS[name][1] in coder.ALLOWED_IMPORTS and why
        for allowed in sorted(names):
            assert import_rules(f"import {name}\nx = {name}.{allowed}\n") == [], allowed
            assert import_rules(f"from {name} import {allowed}\n") == [], allowed
        assert import_rules(f"import {name}\nx = {name}.not_listed\n") == [2]
        assert import_rules(f"from {name} import not_listed\n") == [1]
