"""agents/llm/fit.py: fitting prompts into the context budget."""

from __future__ import annotations

import pytest
from test_llm_support import KERNEL, LOG, TASK, prompt_with_history

from kernelwright.agents.llm import PromptTooLarge, count_tokens, fit_messages, render_messages


def test_fit_messages_keeps_protected_parts_and_log_head_and_tail():
    messages = prompt_with_history()
    full = count_tokens(render_messages(messages), "gpt-4o")
    budget = count_tokens(TASK + KERNEL, "gpt-4o") + 600
    assert full > budget + 1000
    fitted = fit_messages(messages, "gpt-4o", budget)
    assert count_tokens(fitted, "gpt-4o") <= budget
    last = fitted[-1]["content"]
    assert TASK in last and KERNEL in last  # never cut
    assert "FIRST: compile error" in last and "LAST: ValueError: shape mismatch" in last
    assert "tokens of error log trimmed" in last
    assert all("trim" not in m for m in fitted)
    assert fitted[0]["content"] == "You are the coder."
    assert len(fitted) == 2  # the history went before the log was touched


def test_fit_messages_drops_oldest_history_first():
    messages = prompt_with_history()
    full = count_tokens(render_messages(messages), "gpt-4o")
    fitted = fit_messages(messages, "gpt-4o", full - 100)
    contents = [m["content"] for m in fitted]
    assert not any(c.startswith("round 0") for c in contents if isinstance(c, str))
    assert any(c.startswith("round 1") for c in contents if isinstance(c, str))
    assert LOG in contents[-1]  # one dropped turn was enough: the log is whole


def test_fit_messages_returns_plain_messages_when_it_fits():
    messages = prompt_with_history()
    assert fit_messages(messages, "gpt-4o", 10**6) == render_messages(messages)


def test_fit_messages_refuses_to_cut_protected_text():
    with pytest.raises(PromptTooLarge) as info:
        fit_messages(prompt_with_history(), "gpt-4o", 200)
    assert info.value.kind == "bad_request" and "larger context" in str(info.value)


def test_fit_messages_protected_indices_make_the_rest_trimmable():
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "old log\n" + "noise\n" * 2000 + "the end"},
        {"role": "user", "content": TASK},
    ]
    fitted = fit_messages(messages, "gpt-4o", count_tokens(TASK, "gpt-4o") + 200, protected={0, 2})
    assert fitted[2]["content"] == TASK and fitted[0]["content"] == "sys"
    assert fitted[1]["content"].startswith("old log") and fitted[1]["content"].endswith("the end")
