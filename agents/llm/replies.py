"""Replies and structured output: reasoning split off, JSON found and checked, cut replies."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from .usage import AgentUsage

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)

CONTINUE_INSTRUCTION = (
    "Your reply was cut off at the output limit. Continue exactly where it stopped: no "
    "repetition, no preamble, and do not reopen a code block that is already open."
)


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
    def usage(self) -> AgentUsage:
        if self.cached:
            return AgentUsage(calls=1, cached_calls=1)
        return AgentUsage(
            calls=1,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cost_usd=self.cost_usd,
            retries=self.retries,
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


def join_texts(*texts: str) -> str:
    return "\n\n".join(t for t in texts if t)


def merge_replies(first: ChatReply, more: ChatReply, text: str) -> ChatReply:
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
        reasoning=join_texts(first.reasoning, more.reasoning),
    )


def continuation_text(so_far: str, more: str) -> str:
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
