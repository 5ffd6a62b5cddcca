"""agents/llm/tokens.py: tiktoken counts, offline."""

from __future__ import annotations

import socket

from kernelwright.agents.llm import count_tokens
from kernelwright.agents.llm.tokens import encoding_for, ensure_tiktoken_offline


def test_tiktoken_works_with_the_network_blocked(tmp_path, monkeypatch):
    import requests
    import tiktoken.registry

    def refuse(*args, **kwargs):
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(requests, "get", refuse)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # force a load from disk
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    assert ensure_tiktoken_offline() == tmp_path / "tiktoken"
    assert len(list((tmp_path / "tiktoken").iterdir())) == 2  # cl100k_base and o200k_base
    assert count_tokens("hello world", "gpt-4o") == 2
    assert encoding_for("gpt-4").name == "cl100k_base"
    assert count_tokens("def f(x):\n    return x * 2\n", "gpt-4") > 5
    assert encoding_for("my-local-llama-70b").name == "o200k_base"
    assert encoding_for("openai/gpt-4o-mini").name == "o200k_base"
    assert encoding_for("text-davinci-003").name == "o200k_base"  # p50k is not bundled


def test_count_tokens_for_messages_adds_framing():
    text = "hello world"
    assert count_tokens([{"role": "user", "content": text}], "gpt-4o") == 2 + 1 + 3 + 3
