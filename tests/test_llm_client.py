"""agents/llm/client.py through the real openai client against the scripted local server."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import openai
import pytest
from fake_openai import FAKE_API_KEY, drop, error, garbage, reply, stall
from test_llm_support import KERNEL, TASK, USER, VALID, Verdict, client_for, prompt_with_history

from kernelwright.agents.llm import AgentUsage, ChatClient, LLMConfig, LLMError, count_tokens

# The `fake_openai` fixture (a started server, env pointing at it) lives in tests/fake_openai.py.
pytest_plugins = ["fake_openai"]


def test_plain_reply_usage_and_cost(fake_openai):
    fake_openai.script([reply("Hello!", usage=(1000, 200))])
    events: list[dict] = []
    client = client_for(fake_openai, events)
    got = client.chat(USER, agent="planner")
    assert got.text == "Hello!"
    assert (got.prompt_tokens, got.completion_tokens, got.attempts) == (1000, 200, 1)
    # gpt-4o-mini: $0.15 in, $0.60 out per 1M tokens.
    assert got.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)
    assert not got.cached and not got.usage_estimated and got.messages == USER
    [sent] = fake_openai.chat_requests
    assert sent.model == "gpt-4o-mini" and sent.messages == USER and sent.stream  # the default
    assert sent.headers["authorization"] == f"Bearer {FAKE_API_KEY}"
    assert sent.response_format is None
    usage = client.ledger.to_dict()
    assert usage["calls"] == 1 and usage["per_agent"]["planner"]["prompt_tokens"] == 1000
    assert [e["event"] for e in events] == ["llm.call"]
    assert events[0]["agent"] == "planner" and events[0]["cost_usd"] == pytest.approx(0.00027)


def test_streaming_assembles_deltas_and_takes_usage_from_last_chunk(fake_openai):
    text = "def kernel():\n    return 42  # a reply long enough to arrive in many deltas"
    fake_openai.script([reply(text, usage=(321, 17))])
    got = client_for(fake_openai, stream=True).chat(USER, agent="coder")
    assert got.text == text and got.finish_reason == "stop"
    assert (got.prompt_tokens, got.completion_tokens, got.usage_estimated) == (321, 17, False)
    [sent] = fake_openai.chat_requests
    assert sent.stream and sent.body["stream_options"] == {"include_usage": True}


def test_stream_cut_before_its_end_is_retried(fake_openai):
    fake_openai.script([drop(mid_stream="half of a kern"), reply("the whole kernel")])
    events: list[dict] = []
    got = client_for(fake_openai, events, stream=True).chat(USER, agent="coder")
    assert got.text == "the whole kernel" and got.attempts == 2
    assert events[0]["event"] == "llm.retry" and events[0]["kind"] == "connection"


def test_streaming_without_usage_counts_with_tiktoken(fake_openai):
    fake_openai.script([reply("hello there, general kenobi", usage=False)])
    got = client_for(fake_openai, stream=True).chat(USER, agent="coder")
    assert got.usage_estimated
    assert got.completion_tokens == count_tokens("hello there, general kenobi", "gpt-4o-mini")
    assert got.prompt_tokens == count_tokens(USER, "gpt-4o-mini")


def test_429_honours_retry_after(fake_openai):
    fake_openai.script([error(429, headers={"Retry-After": "1"}), reply("ok")])
    events: list[dict] = []
    got = client_for(fake_openai, events).chat(USER, agent="critic")
    assert got.text == "ok" and got.attempts == 2
    first, second = fake_openai.chat_requests
    waited = second.started - first.finished
    assert 0.95 <= waited < 1.6, waited  # the backoff base is 10 ms: only Retry-After explains 1 s
    [retry] = [e for e in events if e["event"] == "llm.retry"]
    assert retry["kind"] == "rate_limit" and retry["status"] == 429 and retry["wait_s"] == 1.0


def test_the_servers_x_should_retry_header_is_obeyed(fake_openai):
    # A 503 the server says not to retry fails at once; a 400 it says to retry is retried.
    fake_openai.script([error(503, "overloaded", headers={"x-should-retry": "false"})])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai, max_retries=2).chat(USER, agent="coder")
    assert info.value.kind == "server" and len(fake_openai.chat_requests) == 1
    assert "the server says not to retry" in str(info.value)
    fake_openai.script([error(400, "try again", headers={"X-Should-Retry": "true"}), reply("ok")])
    got = client_for(fake_openai, max_retries=2).chat(USER, agent="coder")
    assert got.text == "ok" and got.attempts == 2


def test_500_then_success(fake_openai):
    fake_openai.script([error(500, "upstream exploded"), reply("ok")])
    events: list[dict] = []
    got = client_for(fake_openai, events).chat(USER, agent="planner")
    assert got.text == "ok" and got.attempts == 2
    assert [e["event"] for e in events] == ["llm.retry", "llm.call"]
    assert "upstream exploded" in events[0]["message"]


def test_timeout_then_success(fake_openai):
    fake_openai.script([stall(1.0), reply("ok")])
    events: list[dict] = []
    got = client_for(fake_openai, events, timeout_s=0.4).chat(USER, agent="coder")
    assert got.text == "ok" and got.attempts == 2
    assert events[0]["event"] == "llm.retry" and events[0]["kind"] == "timeout"
    first, second = fake_openai.chat_requests
    # Gave up at the 0.4 s timeout, did not wait the 1 s stall (the server's clock: the
    # client's first request also pays for importing and building the HTTP client).
    assert second.started - first.started < 0.9


@pytest.mark.parametrize(
    ("step", "kind", "attempts"),
    [
        (error(503, times=None), "server", 3),
        (error(429, times=None), "rate_limit", 3),
        (stall(0.8, times=None), "timeout", 2),  # a timed-out generation is retried once
        (drop(times=None), "connection", 3),
        (garbage(times=None), "server", 3),
    ],
    ids=["503", "429", "timeout", "drop", "garbage"],
)
def test_retries_exhausted_raise_the_kind(fake_openai, step, kind, attempts):
    fake_openai.script([step])
    client = client_for(fake_openai, max_retries=2, timeout_s=0.3)
    with pytest.raises(LLMError) as info:
        client.chat(USER, agent="coder")
    assert info.value.kind == kind and info.value.attempts == attempts
    assert len(fake_openai.chat_requests) == attempts  # the first attempt and the retries
    total = client.ledger.total()
    assert total.total_tokens == 0 and total.cost_usd == 0 and total.calls == 0  # nothing billed
    assert (total.failed_calls, total.retries, dict(total.failures)) == (1, attempts - 1, {kind: 1})
    assert kind in total.last_error


def test_401_is_an_auth_error_with_the_fix(fake_openai):
    fake_openai.script([error(401, "Incorrect API key provided", times=None)])
    events: list[dict] = []
    with pytest.raises(LLMError) as info:
        client_for(fake_openai, events).chat(USER, agent="planner")
    assert info.value.kind == "auth" and info.value.status == 401
    assert "OPENAI_API_KEY" in str(info.value) and "Incorrect API key" in str(info.value)
    assert len(fake_openai.chat_requests) == 1  # never retried
    assert events[-1]["event"] == "llm.error" and events[-1]["kind"] == "auth"


def test_quota_429_is_not_retried(fake_openai):
    fake_openai.script([error(429, "You exceeded your current quota", code="insufficient_quota")])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai).chat(USER, agent="planner")
    assert info.value.kind == "rate_limit" and len(fake_openai.chat_requests) == 1


def test_unknown_model_404_lists_the_served_models(fake_openai):
    fake_openai.script([error(404, "The model `nope` does not exist")])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai, model="nope").chat(USER, agent="planner")
    assert info.value.kind == "bad_request" and "fake-local-model" in str(info.value)


def test_structured_valid_first_time(fake_openai):
    fake_openai.script([reply(f"```json\n{VALID}\n```")])
    verdict, got = client_for(fake_openai).structured(USER, Verdict, agent="critic")
    assert verdict == Verdict(action="continue", reasons=["spills"], confidence=0.5)
    [sent] = fake_openai.chat_requests
    assert sent.response_format["type"] == "json_schema"
    assert sent.response_format["json_schema"]["name"] == "Verdict"
    assert "JSON schema" in sent.last_user and got.repair_of is None


def test_malformed_json_is_repaired_by_a_second_request(fake_openai):
    broken = '{"action": "continue", "reasons": ["spills"'
    fake_openai.script([reply(broken), reply(VALID)])
    events: list[dict] = []
    verdict, got = client_for(fake_openai, events).structured(USER, Verdict, agent="critic")
    assert verdict.action == "continue" and got.repair_of == broken
    second = fake_openai.chat_requests[1]
    with pytest.raises(json.JSONDecodeError) as exact:
        json.loads(broken)
    assert str(exact.value) in second.last_user  # the repair quotes the parser's own words
    assert second.messages[-2] == {"role": "assistant", "content": broken}
    assert [e["event"] for e in events] == ["llm.call", "llm.repair", "llm.call"]


def test_schema_violation_is_repaired_quoting_the_field(fake_openai):
    wrong = json.dumps({"action": "continue", "reasons": "not a list", "confidence": 0.5})
    fake_openai.script([reply(wrong), reply(VALID)])
    verdict, _ = client_for(fake_openai).structured(USER, Verdict, agent="critic")
    assert verdict.reasons == ["spills"]
    repair = fake_openai.chat_requests[1].last_user
    assert "reasons: Input should be a valid list" in repair


def test_invalid_twice_is_unparseable(fake_openai):
    fake_openai.script([reply("I think we should continue."), reply("{still: not json}")])
    client = client_for(fake_openai)
    with pytest.raises(LLMError) as info:
        client.structured(USER, Verdict, agent="critic")
    assert info.value.kind == "unparseable" and "invalid JSON" in str(info.value)
    assert len(fake_openai.chat_requests) == 2  # one repair, no more
    assert client.ledger.total().calls == 2  # both were billed


def test_rejected_response_format_falls_back(fake_openai):
    fake_openai.script(
        [
            error(400, "response_format json_schema is not supported", param="response_format"),
            error(400, "Unknown parameter: response_format.type json_object"),
            reply(VALID),
            reply(VALID),
        ]
    )
    events: list[dict] = []
    client = client_for(fake_openai, events)
    verdict, got = client.structured(USER, Verdict, agent="planner")
    assert verdict.confidence == 0.5 and got.attempts == 3
    formats = [(r.response_format or {}).get("type") for r in fake_openai.chat_requests]
    assert formats == ["json_schema", "json_object", None]
    assert [e["now"] for e in events if e["event"] == "llm.param_fallback"] == [
        "json_object",
        "none",
    ]
    # Sticky: the next structured call goes straight to the plain instruction.
    client.structured([{"role": "user", "content": "again"}], Verdict, agent="planner")
    assert fake_openai.chat_requests[-1].response_format is None


def test_other_400_is_a_bad_request_without_retry(fake_openai):
    fake_openai.script([error(400, "messages: too many roles")])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai).chat(USER, agent="planner")
    assert info.value.kind == "bad_request" and len(fake_openai.chat_requests) == 1


def test_cache_hit_makes_no_call_and_replays_identically(fake_openai):
    fake_openai.script([reply("the same kernel", usage=(100, 10))])
    client = client_for(fake_openai)
    first = client.chat(USER, agent="coder")
    again = client_for(fake_openai).chat(USER, agent="coder")  # a new client: a new run
    assert len(fake_openai.chat_requests) == 1
    assert again.text == first.text and again.cached and again.cost_usd == 0.0
    assert again.attempts == 0 and again.usage == AgentUsage(calls=1, cached_calls=1)
    assert Path(LLMConfig.from_env().cache_path).exists()


def test_no_cache_calls_the_server_and_still_writes(fake_openai, monkeypatch):
    fake_openai.script([reply("old"), reply("new")])
    client_for(fake_openai).chat(USER, agent="coder")
    monkeypatch.setenv("KERNELWRIGHT_NO_CACHE", "1")
    fresh = client_for(fake_openai).chat(USER, agent="coder")
    assert fresh.text == "new" and not fresh.cached and len(fake_openai.chat_requests) == 2
    monkeypatch.delenv("KERNELWRIGHT_NO_CACHE")
    assert client_for(fake_openai).chat(USER, agent="coder").text == "new"  # written back
    assert len(fake_openai.chat_requests) == 2


def test_concurrency_limit_holds_across_threads(fake_openai):
    fake_openai.script([reply("slow", delay_s=0.15, times=None)])
    client = client_for(fake_openai, max_concurrency=2, use_cache=False)
    threads = [
        threading.Thread(target=client.chat, args=([{"role": "user", "content": f"q{i}"}],),
                         kwargs={"agent": "coder"})
        for i in range(6)
    ]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake_openai.chat_requests) == 6
    assert fake_openai.max_in_flight == 2  # never more, and the two slots were both used
    assert client.ledger.total().calls == 6


def test_with_model_shares_ledger_cache_and_limiter(fake_openai):
    fake_openai.script([reply("a"), reply("b")])
    planner = client_for(fake_openai)
    coder = planner.with_model("o4-mini")
    assert coder.ledger is planner.ledger and coder.cache is planner.cache
    assert coder.limiter is planner.limiter and coder.config.temperature is None
    planner.chat(USER, agent="planner")
    coder.chat(USER, agent="coder")
    sent = fake_openai.chat_requests[1].body
    assert sent["model"] == "o4-mini" and "temperature" not in sent
    assert sent["max_completion_tokens"] == 8192 and "max_tokens" not in sent
    assert set(planner.ledger.by_agent()) == {"planner", "coder"}


def test_max_tokens_switches_to_max_completion_tokens_once(fake_openai):
    hint = "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."
    unknown = "Unknown parameter max_completion_tokens"
    fake_openai.script([error(400, hint), error(400, unknown), error(400, hint)])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai).chat(USER, agent="coder")
    sent = [
        ("max_tokens" in r.body, "max_completion_tokens" in r.body) for r in fake_openai.requests
    ]
    assert sent == [(True, False), (False, True), (True, False)]  # then no ping-pong
    assert info.value.kind == "bad_request" and "max_completion_tokens" in str(info.value)


def test_rejected_optional_params_are_dropped(fake_openai):
    fake_openai.script(
        [
            error(
                400, "Unsupported value: 'temperature' does not support 0.2", param="temperature"
            ),
            reply("ok"),
        ]
    )
    assert client_for(fake_openai).chat(USER, agent="coder").text == "ok"
    assert [("temperature" in r.body) for r in fake_openai.chat_requests] == [True, False]


def test_fake_server_routes_by_system_prompt(fake_openai):
    fake_openai.route("You are the planner", [reply("plan A"), reply("plan B")])
    fake_openai.route("You are the critic", [reply("verdict")])
    fake_openai.script([reply("shared")])
    client = client_for(fake_openai, use_cache=False)

    def ask(system: str) -> str:
        messages = [{"role": "system", "content": system}, *USER]
        return client.chat(messages, agent="x").text

    assert ask("You are the critic. Judge.") == "verdict"
    assert ask("You are the planner. Plan.") == "plan A"
    assert ask("You are the coder.") == "shared"
    assert ask("You are the planner. Plan.") == "plan B"
    assert fake_openai.remaining() == 0 and fake_openai.unexpected == []
    with pytest.raises(LLMError) as info:
        ask("You are the critic. Judge.")  # its queue is used up: a 400, never retried
    assert "script exhausted" in str(info.value) and len(fake_openai.unexpected) == 1
    assert [r.route for r in fake_openai.chat_requests] == [
        "You are the critic",
        "You are the planner",
        None,
        "You are the planner",
        "You are the critic",
    ]


def test_fake_server_lists_models(fake_openai):
    assert "gpt-4o-mini" in client_for(fake_openai).list_models()


def test_azure_client_points_at_the_fake_server(fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("KERNELWRIGHT_MODEL")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", fake_openai.root)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT", "kw-gpt4o")
    config = LLMConfig.from_env()
    assert config.azure and config.model == "kw-gpt4o" and not config.offline
    client = ChatClient(config)
    assert isinstance(client.openai_client, openai.AzureOpenAI)
    fake_openai.script([reply("from azure")])
    assert client.chat(USER, agent="planner").text == "from azure"
    [sent] = fake_openai.chat_requests
    assert sent.path == "/openai/deployments/kw-gpt4o/chat/completions"
    assert "api-version=2024-10-21" in sent.query and sent.headers["api-key"] == "azure-key"


def test_chat_fits_the_prompt_into_a_small_context(fake_openai):
    fake_openai.script([reply("ok")])
    budget_window = count_tokens(TASK + KERNEL, "gpt-4o-mini") + 900
    client = client_for(fake_openai, context_window=budget_window, max_output_tokens=200)
    got = client.chat(prompt_with_history(), agent="coder")
    [sent] = fake_openai.chat_requests
    assert sent.messages == got.messages and len(sent.messages) < 6
    assert TASK in sent.messages[-1]["content"] and KERNEL in sent.messages[-1]["content"]
    assert count_tokens(sent.messages, "gpt-4o-mini") <= client.config.prompt_budget


def test_chat_refuses_a_prompt_whose_protected_parts_do_not_fit(fake_openai):
    events: list[dict] = []
    client = client_for(fake_openai, events, context_window=600, max_output_tokens=200)
    with pytest.raises(LLMError) as info:
        client.chat(prompt_with_history(), agent="coder")
    assert info.value.kind == "bad_request" and fake_openai.requests == []
    assert events[-1]["event"] == "llm.error"


def test_offline_config_refuses_to_call():
    config = LLMConfig()  # model "offline"
    assert config.offline
    with pytest.raises(LLMError) as info:
        ChatClient(config).chat(USER, agent="planner")
    assert info.value.kind == "auth"
