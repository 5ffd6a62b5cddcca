"""LLMError, and how a failed attempt is classified: by status, error code and Retry-After."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from ...errors import KernelwrightError

if TYPE_CHECKING:
    import openai

    from .usage import AgentUsage


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


class LLMError(KernelwrightError):
    """A chat call that failed for good; `kind` says why (one of ERROR_KINDS).

    `circuit_open`: the call was never sent, because the endpoint had failed too many calls in a
    row (the breaker's one line already said so). `usage`: what the failed call was billed (a
    filtered reply still costs its prompt).
    """

    fault = "configuration"  # the endpoint configured (its key, URL, model, window)

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 0,
        circuit_open: bool = False,
        usage: AgentUsage | None = None,
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


class Failure(KernelwrightError):
    """One failed attempt, classified (internal: becomes LLMError once retries are spent)."""

    fault = "configuration"

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


def downgrade_for(failure: Failure, params: Mapping[str, Any]) -> tuple[str, Any] | None:
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


def classify_error(err: BaseException) -> Failure:
    """An SDK or transport exception as a Failure with our kind, status and Retry-After."""
    import openai

    if isinstance(err, Failure):
        return err
    if isinstance(err, openai.APITimeoutError):
        return Failure("timeout", f"request timed out: {err}")
    if isinstance(err, openai.APIConnectionError):
        return Failure("connection", f"connection failed: {err.__cause__ or err}")
    if isinstance(err, openai.APIStatusError):
        return _status_failure(err)
    if isinstance(err, openai.APIResponseValidationError | json.JSONDecodeError):
        return Failure("server", f"the server's reply was not a valid completion: {err}")
    if _is_transport_error(err):  # a stream cut mid-way surfaces as the HTTP library's error
        return Failure("connection", f"connection failed: {type(err).__name__}: {err}")
    raise err


def _status_failure(err: openai.APIStatusError) -> Failure:
    """Classified by status, error code and Retry-After, never by words in the message: Azure's
    transient 429 links to a "quotaincrease" page and says to retry in 2 seconds. A server's
    `x-should-retry: true|false` header overrides whether to retry (OpenAI sends it, and the
    openai SDK obeys it; kernelwright does its own retries, so it must read it too)."""
    failure = _status_kind(err)
    hint = should_retry(err.response.headers) if err.response is not None else None
    if hint is not None and hint != failure.retryable:
        failure.retryable = hint
        failure.message += f" (the server says {'to retry' if hint else 'not to retry'})"
        failure.args = (failure.message,)
    return failure


def should_retry(headers: Mapping[str, str] | None) -> bool | None:
    """The server's `x-should-retry` header: True, False, or None when absent or unreadable."""
    if not headers:
        return None
    value = {k.lower(): v for k, v in headers.items()}.get("x-should-retry", "").strip().lower()
    return {"true": True, "false": False}.get(value)


def _status_kind(err: openai.APIStatusError) -> Failure:
    status, detail = err.status_code, _error_detail(err)
    code, kind = (err.code or "").lower(), str(getattr(err, "type", None) or "").lower()
    wait = retry_after_s(err.response.headers) if err.response is not None else None
    extra: dict[str, Any] = {"status": status, "wait_s": wait, "param": err.param, "code": code}
    if status in (401, 403):
        return Failure(
            "auth", f"the endpoint refused the credentials ({status}): {detail}", **extra
        )
    if status == 429 and "insufficient_quota" in (code, kind) and wait is None:
        # A billing limit, not a rate limit: waiting will not help.
        return Failure(
            "rate_limit",
            f"quota exhausted (429, insufficient_quota): {detail} -- add credit or raise the "
            "project's limit, or run with --model offline",
            retryable=False,
            **extra,
        )
    if status == 429:
        return Failure("rate_limit", f"rate limited (429): {detail}", **extra)
    if status == 408:
        return Failure("timeout", f"the server timed out (408): {detail}", **extra)
    if code == "content_filter" or _inner_code(err) == "responsibleaipolicyviolation":
        return Failure(
            "content_filter",
            f"the provider's content filter refused the prompt ({status}): {detail}; the same "
            "request would be refused again, so it is not repeated",
            retryable=False,
            **extra,
        )
    if status in (501, 505):  # the server does not implement this request: no retry will
        return Failure(
            "server",
            f"the endpoint does not implement this request ({status}): {detail}; check "
            "OPENAI_BASE_URL (it must serve /chat/completions)",
            retryable=False,
            **extra,
        )
    if status == 409 or status >= 500:
        return Failure("server", f"server error ({status}): {detail}", **extra)
    return Failure("bad_request", f"request rejected ({status}): {detail}", **extra)


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
