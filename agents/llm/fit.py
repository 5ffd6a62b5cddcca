"""Fitting prompts into the context budget: only parts marked trimmable are cut."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import PromptTooLarge
from .messages import SECTION_SEPARATOR, Message, Section, TrimMode, render_content, render_messages
from .tokens import count_tokens, encoding_for

if TYPE_CHECKING:
    import tiktoken


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
