"""agents/llm/usage.py: AgentUsage and the UsageLedger, and cost through the scripted server."""

from __future__ import annotations

import json
import threading

import pytest
from fake_openai import reply
from test_llm_support import USER, client_for

from kernelwright.agents.llm import AgentUsage, UsageLedger

# The `fake_openai` fixture (a started server, env pointing at it) lives in tests/fake_openai.py.
pytest_plugins = ["fake_openai"]


def test_unknown_model_costs_zero_with_a_note(fake_openai):
    fake_openai.script([reply("hi", usage=(50, 5))])
    client = client_for(fake_openai, model="my-local-coder")
    assert client.chat(USER, agent="coder").cost_usd == 0.0
    assert any("my-local-coder" in note for note in client.ledger.to_dict()["notes"])


def test_usage_ledger_sums_and_round_trips():
    ledger = UsageLedger()

    def add() -> None:
        for _ in range(100):
            ledger.record(
                "coder", AgentUsage(calls=1, prompt_tokens=10, completion_tokens=2, cost_usd=0.001)
            )

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ledger.record("critic", AgentUsage(calls=1, cached_calls=1))
    total = ledger.total()
    assert (total.calls, total.cached_calls, total.prompt_tokens) == (401, 1, 4000)
    assert total.cost_usd == pytest.approx(0.4)
    again = UsageLedger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    assert again.by_agent()["coder"].completion_tokens == 800
    assert set(ledger.to_dict()) >= {"calls", "prompt_tokens", "cost_usd", "per_agent"}
