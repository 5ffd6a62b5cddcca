"""The openai SDK's side: building its client, and reading a completion or a stream from it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pydantic

from .config import DEFAULT_AZURE_API_VERSION, LLMConfig
from .errors import Failure

if TYPE_CHECKING:
    import openai


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


def _reasoning_of(part: Any) -> str:
    """The reasoning a message or delta carries beside its content: vLLM's and DeepSeek's
    reasoning_content, or the reasoning field of Ollama, OpenRouter and newer vLLM."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(part, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def read_completion(response: Any) -> tuple[str, str, str | None, tuple[int, int] | None]:
    """(content, reasoning, finish_reason, usage) of a completion."""
    if not getattr(response, "choices", None):
        raise Failure("server", f"the completion has no choices: {str(response)[:300]}")
    choice = response.choices[0]
    text = choice.message.content or ""  # None when Azure's filter withheld it
    usage = _usage_pair(getattr(response, "usage", None))
    return text, _reasoning_of(choice.message), choice.finish_reason, usage


def unstreamed_completion(stream: Any) -> Any | None:
    """The completion a server sent as one application/json body although the request asked
    for a stream (some gateways and older servers ignore `stream: true`); None when the reply
    is an event stream (or says nothing of its type). Read before the stream is iterated: the
    body is still unread then."""
    ctype = _content_type(stream).lower()
    if "application/json" not in ctype:
        return None
    import openai

    response = stream.response
    try:
        body = json.loads(response.read())
    except (ValueError, UnicodeDecodeError) as err:
        raise Failure(
            "server",
            f"the server's reply was not a valid completion (content-type {ctype!r}): {err}",
        ) from None
    finally:
        response.close()
    try:
        return openai.types.chat.ChatCompletion.model_validate(body)
    except pydantic.ValidationError as err:
        raise Failure(
            "server",
            f"the server answered a stream request with JSON that is not a completion: "
            f"{str(body)[:300]} ({err.error_count()} problem(s))",
        ) from None


def read_stream(stream: Any) -> tuple[str, str, str | None, tuple[int, int] | None]:
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
            raise Failure(
                "server", f"the server's reply was not an event stream (content-type {ctype!r})"
            )
    if finish is None:  # EOF before the finish chunk: a cut connection, not a short reply
        raise Failure("connection", f"the stream ended early, after {len(pieces)} deltas")
    return "".join(pieces), "".join(thoughts), finish, usage


def _content_type(stream: Any) -> str:
    response = getattr(stream, "response", None)
    headers = getattr(response, "headers", None) or {}
    return str(headers.get("content-type", ""))


def _usage_pair(usage: Any) -> tuple[int, int] | None:
    if usage is None or usage.prompt_tokens is None:
        return None
    return int(usage.prompt_tokens), int(usage.completion_tokens or 0)
