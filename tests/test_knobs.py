"""The registry of KERNELWRIGHT_* variables (knobs.py, issue 26): one declaration per name,
every name the code reads declared, the README's table generated from it, and the two retry
counts that shared KERNELWRIGHT_MAX_RETRIES apart."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from kernelwright import knobs
from kernelwright.agents.llm.config import DEFAULT_MAX_OUTPUT_TOKENS, LLMConfig
from kernelwright.run.config import RunConfig, resolve_config

ROOT = Path(knobs.__file__).parent
# Names in the source that are no environment variables: the constants an exported module
# defines (commands/export.py), and the patterns of documentation text.
NOT_VARIABLES = {"KERNELWRIGHT_ENVELOPE", "KERNELWRIGHT_GUARD", "KERNELWRIGHT_"}


def test_a_name_declared_twice_is_refused():
    before = dict(knobs.KNOBS)
    with pytest.raises(knobs.DuplicateKnob, match="KERNELWRIGHT_ROUNDS is declared twice"):
        knobs.declare("KERNELWRIGHT_ROUNDS", "int", 7, "again", ("run",), field="rounds")
    with pytest.raises(knobs.DuplicateKnob):  # an old name is no new knob either
        knobs.declare("KERNELWRIGHT_MAX_RETRIES", "int", 1, "again", ("run",))
    assert before == knobs.KNOBS


def test_every_variable_the_package_reads_is_declared():
    names = set(knobs.KNOBS) | {old for k in knobs.KNOBS.values() for old in k.old_names}
    found: dict[str, str] = {}
    for path in ROOT.rglob("*.py"):
        if "tests" in path.relative_to(ROOT).parts:
            continue
        for name in re.findall(r"KERNELWRIGHT_[A-Z0-9_]*", path.read_text()):
            found.setdefault(name, str(path))
    missing = {n: p for n, p in found.items() if n not in names and n not in NOT_VARIABLES}
    assert not missing, f"read but not declared in knobs.py: {missing}"


def test_the_readme_table_is_the_registry():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- knobs:[^\n]*-->\n(.*?)\n<!-- /knobs -->", readme, re.S)
    assert block, "README.md lost its generated table of variables"
    assert block.group(1) == knobs.readme_table(), "run `python3 -m kernelwright.knobs`"
    for name in knobs.KNOBS:
        assert f"`{name}`" in readme


def test_run_and_llm_configs_take_the_registry_defaults():
    run_fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert run_fields == {k.field for k in knobs.fields("run")}
    config = RunConfig()
    for knob in knobs.fields("run"):
        assert getattr(config, knob.field) == knob.default, knob.name
    llm = LLMConfig()
    llm_fields = {f.name for f in dataclasses.fields(LLMConfig)}
    for knob in knobs.fields("llm"):
        if knob.field in llm_fields and knob.field not in ("model", "prices", "azure"):
            assert getattr(llm, knob.field) == knob.default, knob.name
    assert str(DEFAULT_MAX_OUTPUT_TOKENS) in knobs.KNOBS["KERNELWRIGHT_MAX_OUTPUT_TOKENS"].help


def test_the_ray_and_the_llm_retries_are_set_apart():
    """KERNELWRIGHT_MAX_RETRIES set the LLM's retries and changed the Ray executor's with them."""
    env = {"KERNELWRIGHT_LLM_MAX_RETRIES": "1"}
    assert resolve_config({}, env=env)[0].max_retries == 2
    assert LLMConfig.from_env(env=env).max_retries == 1
    env = {"KERNELWRIGHT_RAY_MAX_RETRIES": "0"}
    assert resolve_config({}, env=env)[0].max_retries == 0
    assert LLMConfig.from_env(env=env).max_retries == 4


def test_the_old_retries_name_still_sets_both_with_one_note(capsys, monkeypatch):
    monkeypatch.setattr(knobs, "_noted", set())
    env = {"KERNELWRIGHT_MAX_RETRIES": "5"}
    assert resolve_config({}, env=env)[0].max_retries == 5
    assert LLMConfig.from_env(env=env).max_retries == 5
    # A new name beats the old one for its own side only.
    both = {**env, "KERNELWRIGHT_LLM_MAX_RETRIES": "1"}
    assert (
        resolve_config({}, env=both)[0].max_retries,
        LLMConfig.from_env(env=both).max_retries,
    ) == (5, 1)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KERNELWRIGHT_MAX_RETRIES is deprecated" in err
    assert "KERNELWRIGHT_LLM_MAX_RETRIES and KERNELWRIGHT_RAY_MAX_RETRIES" in err


def test_a_bad_value_names_its_variable():
    with pytest.raises(ValueError, match="KERNELWRIGHT_RAY_MAX_RETRIES='many'"):
        resolve_config({}, env={"KERNELWRIGHT_RAY_MAX_RETRIES": "many"})
    with pytest.raises(ValueError, match="KERNELWRIGHT_RAY_MAX_RETRIES must be at least 0"):
        resolve_config({}, env={"KERNELWRIGHT_RAY_MAX_RETRIES": "-1"})
