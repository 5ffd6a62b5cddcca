"""Shared by the tests of agents/llm/: a client for the scripted server, a schema, prompts."""

from __future__ import annotations

import json

import pydantic
from fake_openai import FakeOpenAI

from kernelwright.agents.llm import ChatClient, LLMConfig, Section

USER = [{"role": "user", "content": "Say hello."}]


class Verdict(pydantic.BaseModel):
    """A stand-in for the critic's schema."""

    action: str
    reasons: list[str]
    confidence: float


VALID = json.dumps({"action": "continue", "reasons": ["spills"], "confidence": 0.5})


def client_for(server: FakeOpenAI, events: list | None = None, **changes) -> ChatClient:
    """A client configured from the fixture's environment, with test-specific changes."""
    config = LLMConfig.from_env(**changes)
    assert config.base_url == server.url
    return ChatClient(config, on_event=None if events is None else events.append)


TASK = "class Model(nn.Module):\n" + "".join(f"    # task line {i}\n" for i in range(60))


KERNEL = "@triton.jit\ndef _k(x_ptr):\n" + "".join(f"    # kernel line {i}\n" for i in range(60))


LOG = "FIRST: compile error at line 12\n" + "".join(
    f"  frame {i}: in triton/compiler.py\n" for i in range(400)
) + "LAST: ValueError: shape mismatch"  # fmt: skip


def prompt_with_history() -> list[dict]:
    history = [
        {"role": "user", "content": f"round {i} feedback " + "blah " * 200, "trim": 2}
        for i in range(4)
    ]
    return [
        {"role": "system", "content": "You are the coder."},
        *history,
        {
            "role": "user",
            "content": [
                "## Task", TASK, "## Current kernel", KERNEL,
                Section(LOG, trim=1, mode="head_tail", label="error log"),
            ],
        },
    ]  # fmt: skip
