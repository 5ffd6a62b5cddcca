"""agents/llm/config.py: LLMConfig from flags, the environment and defaults."""

from __future__ import annotations

import dataclasses

import pytest

from kernelwright.agents.llm import LLMConfig
from kernelwright.agents.llm.config import DEFAULT_CONTEXT_WINDOW


def test_from_env_precedence_and_offline(monkeypatch):
    env = {"OPENAI_API_KEY": "k", "KERNELWRIGHT_MODEL": "gpt-4o", "KERNELWRIGHT_TIMEOUT_S": "7"}
    config = LLMConfig.from_env(env=env)
    assert (config.model, config.timeout_s, config.api_key) == ("gpt-4o", 7.0, "k")
    flagged = LLMConfig.from_env("gpt-4.1-mini", env=env, timeout_s=3.0, max_retries=None)
    assert (flagged.model, flagged.timeout_s, flagged.max_retries) == ("gpt-4.1-mini", 3.0, 4)
    assert not config.offline and config.window == 128_000
    assert LLMConfig.from_env(env={}).offline  # no key, no server
    assert LLMConfig.from_env("offline", env=env).offline
    local = LLMConfig.from_env("qwen2.5-coder", env={"OPENAI_BASE_URL": "http://localhost:8000/v1"})
    assert not local.offline and local.window == DEFAULT_CONTEXT_WINDOW
    reasoning = LLMConfig.from_env("o3", env=env)
    assert reasoning.temperature is None
    priced = LLMConfig.from_env(env={**env, "KERNELWRIGHT_PRICES": '{"gpt-4o": [1, 2]}'})
    assert priced.price() == (1, 2) and priced.cost_usd(10**6, 10**6) == 3.0
    with pytest.raises(TypeError, match="no field"):
        LLMConfig.from_env(env=env, bogus=1)


def test_config_is_frozen_and_replaceable():
    config = LLMConfig(model="gpt-4o", api_key="k")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model = "x"  # type: ignore[misc]
    assert dataclasses.replace(config, model="gpt-4.1").window == 1_047_576
    assert config.to_dict()["api_key"] == "set" and config.to_dict()["price_per_1m"] == (2.5, 10.0)


def test_a_bad_value_in_the_llm_environment_is_an_error_naming_it():
    """One parser for both configs' variables: KERNELWRIGHT_STREAM=maybe was silently false for
    the LLM client while KERNELWRIGHT_TUNE=maybe was an error for the run."""
    with pytest.raises(ValueError, match="KERNELWRIGHT_STREAM='maybe'"):
        LLMConfig.from_env(env={"KERNELWRIGHT_STREAM": "maybe"})
    with pytest.raises(ValueError, match="KERNELWRIGHT_MAX_RETRIES='many'"):
        LLMConfig.from_env(env={"KERNELWRIGHT_MAX_RETRIES": "many"})
    assert LLMConfig.from_env(env={"KERNELWRIGHT_STREAM": "off"}).stream is False
    assert LLMConfig.from_env(env={"KERNELWRIGHT_NO_CACHE": "yes"}).use_cache is False
