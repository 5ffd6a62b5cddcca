"""Chat messages as the agents build them: plain text, or parts marked trimmable (Section)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Message = Mapping[str, Any]
EventSink = Callable[[dict[str, Any]], None]

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
