"""LLMConfig: how to reach one model (flags > environment > defaults), its window and budgets."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ... import knobs
from ...knobs import parse_bool
from ...sandbox.config import cache_dir
from .tokens import has_known_tokenizer
from .usage import DEFAULT_PRICES

DEFAULT_MODEL = "gpt-4.1"  # used when a key is set but no model is named
DEFAULT_AZURE_API_VERSION = "2024-10-21"  # the GA Azure OpenAI data-plane version
# Unknown models (a local vLLM/Ollama server, a new name) get this window: 32k is what common
# open coder models serve by default; override with --context-window/KERNELWRIGHT_CONTEXT_WINDOW.
# A server that states a smaller one in its error (vLLM does) is believed from then on.
DEFAULT_CONTEXT_WINDOW = 32_768
# A candidate file with its explanation is 2-5k tokens; 8k leaves room for a long one.
# (KERNELWRIGHT_MAX_OUTPUT_TOKENS's help in knobs.py says 8192 too: test_knobs holds them alike.)
DEFAULT_MAX_OUTPUT_TOKENS = 8_192
# Our tokenizer is only exact for OpenAI models; for others o200k_base can under-count by ~10%.
UNKNOWN_TOKENIZER_HEADROOM = 0.9
PROMPT_MARGIN_TOKENS = 64  # chat framing the per-message estimate may miss
MIN_PROMPT_BUDGET = 256

# Context windows (input + output tokens). Lookup strips a "provider/" prefix, then takes the
# longest matching prefix, so "gpt-4o-2024-08-06" finds "gpt-4o" and "gpt-4o-mini-x" "gpt-4o-mini".
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "gpt-oss": 131_072,
}

# Reasoning models reject temperature != 1 and max_tokens (they want max_completion_tokens).
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def _lookup(table: Mapping[str, Any], model: str) -> Any | None:
    """Exact name, else the longest table key that prefixes it; a "provider/" prefix is ignored."""
    name = model.rsplit("/", 1)[-1].lower()
    if name in table:
        return table[name]
    matches = [key for key in table if name.startswith(key)]
    return table[max(matches, key=len)] if matches else None


def is_reasoning_model(model: str) -> bool:
    """o-series and gpt-5: no temperature, max_completion_tokens instead of max_tokens."""
    return model.rsplit("/", 1)[-1].lower().startswith(_REASONING_PREFIXES)


_L = knobs.defaults("llm")  # the defaults of the fields an environment variable sets (knobs.py)
# LLMConfig fields read from their variable as they are; model, azure, no_cache and prices are
# read by _env_values itself.
_PLAIN_FIELDS = (
    "timeout_s",
    "call_budget_s",
    "breaker_failures",
    "max_retries",
    "retry_base_s",
    "max_concurrency",
    "temperature",
    "max_output_tokens",
    "context_window",
    "stream",
    "response_format",
    "seed",
)


def default_cache_path(env: Mapping[str, str] | None = None) -> str:
    """KERNELWRIGHT_CACHE_DIR (default ~/.cache/kernelwright) / llm_cache.sqlite."""
    return str(cache_dir(env) / "llm_cache.sqlite")


@dataclass(frozen=True)
class LLMConfig:
    """How to reach one model; one per role (dataclasses.replace(cfg, model=...))."""

    model: str = "offline"
    base_url: str | None = None  # None: api.openai.com (or the Azure endpoint)
    api_key: str | None = None
    azure: bool = False
    api_version: str | None = None  # Azure only
    azure_endpoint: str | None = None  # Azure only, e.g. https://NAME.openai.azure.com
    azure_deployment: str | None = None  # Azure only; None: the model name is the deployment
    # Per HTTP attempt; streamed, it is the longest silence between two chunks, so a long
    # generation that keeps sending tokens is never cut by it.
    timeout_s: float = _L["timeout_s"]
    max_retries: int = _L[
        "max_retries"
    ]  # retries after the first attempt, for 429/5xx/drops (timeouts: 1)
    retry_base_s: float = _L["retry_base_s"]  # backoff: base * 2**(attempt-1), jittered x[0.5, 1]
    retry_max_s: float = 60.0  # the longest wait; a longer Retry-After ends the call at once
    # No retry starts once a call has taken this long: each retry of a generation is billed,
    # and five 120 s timeouts made one call a 10-minute wait.
    call_budget_s: float = _L["call_budget_s"]
    # The circuit breaker: after this many calls in a row failed (each past its retries), the
    # endpoint is not called again for the rest of the run.
    breaker_failures: int = _L["breaker_failures"]
    max_concurrency: int = _L["max_concurrency"]  # requests in flight per client (threads share it)
    temperature: float | None = _L["temperature"]  # None: not sent (reasoning models reject it)
    # None: up to DEFAULT_MAX_OUTPUT_TOKENS, fitted to what the window leaves after the prompt.
    max_output_tokens: int | None = _L["max_output_tokens"]
    context_window: int | None = _L[
        "context_window"
    ]  # None: CONTEXT_WINDOWS, unknown -> DEFAULT_CONTEXT_WINDOW
    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    stream: bool = _L["stream"]  # long generations stream: no timeout while tokens arrive
    cache_path: str | None = None  # None: no response cache
    use_cache: bool = True  # False (--no-cache): never read the cache, still write it
    response_format: Literal["json_schema", "json_object", "none"] = _L["response_format"]
    seed: int | None = _L["seed"]

    @property
    def offline(self) -> bool:
        """True when the agents must use their rules: no model, or nothing to reach."""
        if self.model.strip().lower() in ("", "offline", "none"):
            return True
        reachable = self.base_url or (self.azure and self.azure_endpoint)
        return not self.api_key and not reachable

    @property
    def window(self) -> int:
        """The model's context window in tokens (input + output)."""
        if self.context_window:
            return self.context_window
        return _lookup(CONTEXT_WINDOWS, self.model) or DEFAULT_CONTEXT_WINDOW

    @property
    def output_limit(self) -> int:
        """The most output tokens a request asks for (the window may leave fewer)."""
        return self.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS

    def output_reserve(self, window: int) -> int:
        """Output tokens kept free of prompt: the asked-for limit, else at most half the window
        (an 8k window with the default 8k limit would leave the prompt nothing)."""
        if self.max_output_tokens:
            return self.max_output_tokens
        return min(DEFAULT_MAX_OUTPUT_TOKENS, window // 2)

    @property
    def prompt_budget(self) -> int:
        """Tokens a prompt may use: the window minus the reserved output and a margin."""
        return prompt_budget_for(self, self.window)

    def price(self) -> tuple[float, float] | None:
        """USD per 1M (input, output) tokens, None when the model is not in the table."""
        return _lookup({k.lower(): v for k, v in self.prices.items()}, self.model)

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        price = self.price()
        if price is None:
            return 0.0
        return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6

    def to_dict(self) -> dict[str, Any]:
        """For run.json: everything but the key (and the price table, which is long)."""
        out = dataclasses.asdict(self)
        out.pop("prices")
        out["api_key"] = "set" if self.api_key else None
        out["price_per_1m"] = self.price()
        return out

    @classmethod
    def from_env(
        cls, model: str | None = None, *, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> LLMConfig:
        """Flags (model, overrides; None means "not given") > environment > defaults.

        Environment: OPENAI_API_KEY, OPENAI_BASE_URL, KERNELWRIGHT_MODEL; Azure when
        AZURE_OPENAI_ENDPOINT or KERNELWRIGHT_AZURE=1 (AZURE_OPENAI_API_KEY, OPENAI_API_VERSION,
        AZURE_OPENAI_DEPLOYMENT); the KERNELWRIGHT_* variables knobs.py declares for "llm"
        (KERNELWRIGHT_TIMEOUT_S, KERNELWRIGHT_LLM_MAX_RETRIES, ...).
        """
        env = dict(os.environ if env is None else env)
        values = _env_values(env)
        if model is not None:
            values["model"] = model
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"LLMConfig has no field(s) {sorted(unknown)}")
        if "prices" in overrides and overrides["prices"] is not None:
            values["prices"] = {**DEFAULT_PRICES, **overrides["prices"]}
        name = values.get("model", "")
        if "temperature" not in values and is_reasoning_model(name):
            values["temperature"] = None
        return cls(**values)


def prompt_budget_for(config: LLMConfig, window: int, token_ratio: float | None = None) -> int:
    """Tokens (as tiktoken counts them) a prompt may use in `window`: the window minus the
    reply's reserve and a margin, shrunk by how much more the server's tokenizer counts
    (`token_ratio`, learned from its errors) or, unknown, by the 10% headroom."""
    budget = window - config.output_reserve(window) - PROMPT_MARGIN_TOKENS
    if token_ratio:
        budget = int(budget / token_ratio)
    elif not has_known_tokenizer(config.model):
        budget = int(budget * UNKNOWN_TOKENIZER_HEADROOM)
    return max(budget, MIN_PROMPT_BUDGET)


def min_output_reserve(window: int) -> int:
    """The least output room a prompt may leave: a candidate file is ~2k tokens."""
    return min(2_048, window // 4)


def endpoint_url(config: LLMConfig) -> str:
    """Where the config's requests go, as a person would name it (and the key of what the
    endpoint taught a run)."""
    if config.azure:
        where = config.azure_endpoint or config.base_url or "(Azure endpoint not set)"
        return f"{where} (deployment {config.azure_deployment or config.model})"
    return config.base_url or "https://api.openai.com/v1"


def _env_values(env: Mapping[str, str]) -> dict[str, Any]:
    """LLMConfig fields found in the environment (absent ones keep the dataclass default)."""
    values: dict[str, Any] = {}
    azure = _env_bool(env.get("KERNELWRIGHT_AZURE")) or bool(env.get("AZURE_OPENAI_ENDPOINT"))
    if azure:
        values["azure"] = True
        values["azure_endpoint"] = env.get("AZURE_OPENAI_ENDPOINT")
        values["api_version"] = env.get("OPENAI_API_VERSION") or DEFAULT_AZURE_API_VERSION
        values["azure_deployment"] = env.get("AZURE_OPENAI_DEPLOYMENT")
        values["api_key"] = env.get("AZURE_OPENAI_API_KEY") or env.get("OPENAI_API_KEY")
    else:
        values["api_key"] = env.get("OPENAI_API_KEY")
        values["base_url"] = env.get("OPENAI_BASE_URL")
    model = env.get("KERNELWRIGHT_MODEL")
    if model is None and (values.get("api_key") or values.get("base_url")):
        model = env.get("AZURE_OPENAI_DEPLOYMENT") or DEFAULT_MODEL
    values["model"] = model or "offline"
    for name in _PLAIN_FIELDS:
        knob = knobs.for_field(name, "llm")
        if knob.lookup(env) is not None:  # a bad value raises ValueError naming its variable
            values[name] = knob.read(env)
    values["cache_path"] = default_cache_path(env)
    values["use_cache"] = not _env_bool(env.get("KERNELWRIGHT_NO_CACHE"))
    if env.get("KERNELWRIGHT_PRICES"):
        extra = json.loads(env["KERNELWRIGHT_PRICES"])
        values["prices"] = {**DEFAULT_PRICES, **{k: tuple(v) for k, v in extra.items()}}
    return {k: v for k, v in values.items() if v is not None or k == "temperature"}


def _env_bool(value: str | None) -> bool:
    return parse_bool(value or "")
