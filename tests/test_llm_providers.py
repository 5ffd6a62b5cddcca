"""agents/llm/client.py against providers' documented failures (issue 19), through the real
openai client and the scripted server's provider modes (tests/fake_openai.py): Azure's 429,
vLLM's context window, finish_reason length and content_filter, reasoning models under other
names, <think> blocks, timeouts, and the circuit breaker."""

from __future__ import annotations

import json
import time

import pydantic
import pytest
from fake_openai import (
    VLLM,
    FakeOpenAI,
    ReasoningModel,
    azure_prompt_filtered,
    azure_rate_limit,
    content_filtered,
    error,
    not_implemented,
    openai_quota,
    prompt_tokens_of,
    reply,
    stall,
)

from kernelwright.agents.llm import (
    ChatClient,
    Endpoints,
    LLMConfig,
    LLMError,
    PromptTooLarge,
    ResponseCache,
)
from kernelwright.agents.llm.errors import context_limits
from kernelwright.agents.llm.replies import CONTINUE_INSTRUCTION, split_reasoning

pytest_plugins = ["fake_openai"]

USER = [{"role": "user", "content": "Write the kernel."}]
PLAN = json.dumps({"summary": "fuse", "steps": ["one kernel"]})


class Plan(pydantic.BaseModel):
    summary: str
    steps: list[str]


def client_for(server: FakeOpenAI, events: list | None = None, **changes) -> ChatClient:
    config = LLMConfig.from_env(**changes)
    assert config.base_url == server.url
    return ChatClient(config, on_event=None if events is None else events.append)


def named(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["event"] == name]


# -- 1. 429s are classified by code and Retry-After, not by words ------------------------------
def test_azure_transient_429_is_retried_after_its_retry_after(fake_openai):
    fake_openai.script([azure_rate_limit(1), reply("ok")])
    events: list[dict] = []
    got = client_for(fake_openai, events).chat(USER, agent="coder")
    assert got.text == "ok" and got.attempts == 2
    first, second = fake_openai.chat_requests
    assert 0.95 <= second.started - first.finished < 1.6  # retry-after-ms: 1000
    [retry] = named(events, "llm.retry")
    assert retry["kind"] == "rate_limit" and retry["wait_s"] == 1.0
    assert "quotaincrease" in retry["message"]  # the link that used to be read as a quota


def test_openai_insufficient_quota_is_not_retried_and_says_what_to_do(fake_openai):
    fake_openai.script([openai_quota()])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai).chat(USER, agent="coder")
    assert info.value.kind == "rate_limit" and len(fake_openai.chat_requests) == 1
    assert "insufficient_quota" in str(info.value) and "add credit" in str(info.value)


def test_a_retry_after_longer_than_the_client_waits_ends_the_call_at_once(fake_openai):
    fake_openai.script([azure_rate_limit(86400)])  # Azure's answer to a deployment with no TPM
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        client_for(fake_openai).chat(USER, agent="coder")
    assert time.monotonic() - started < 1.0 and len(fake_openai.chat_requests) == 1
    assert "asked to wait 86400 s" in str(info.value)


def test_501_is_not_retried(fake_openai):
    fake_openai.script([not_implemented()])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai).chat(USER, agent="coder")
    assert info.value.kind == "server" and info.value.status == 501
    assert len(fake_openai.chat_requests) == 1 and "OPENAI_BASE_URL" in str(info.value)


# -- 2. the output budget fits the server's window ----------------------------------------------
LONG = [{"role": "user", "content": "Here is the task and the kernel. " * 600}]


@pytest.mark.parametrize("wording", ["new", "old"])
def test_vllm_window_is_read_from_its_error_and_the_request_fitted_once(
    fake_openai, wording, tmp_path
):
    fake_openai.serve(VLLM(max_model_len=8192, wording=wording))
    fake_openai.script([reply("ok", times=None)])
    events: list[dict] = []
    client = client_for(fake_openai, events, model="qwen2.5-coder-32b")  # assumed 32k window
    assert client.chat(LONG, agent="coder").text == "ok"
    refused, answered = fake_openai.chat_requests
    assert refused.step == "provider" and refused.body["max_tokens"] == 8192
    # The same parameter name (no flip to max_completion_tokens), a budget that fits.
    assert "max_completion_tokens" not in answered.body
    assert prompt_tokens_of(answered.body) + answered.body["max_tokens"] <= 8192
    assert answered.body["max_tokens"] > 2000  # fitted to the window, not starved
    [learned] = named(events, "llm.window")
    assert learned["window"] == 8192 and learned["agent"] == "coder"
    assert not named(events, "llm.param_fallback")
    # Later calls of the run fit it from the start; so does the next run (same reply cache).
    client.chat([{"role": "user", "content": LONG[0]["content"] + " again"}], agent="planner")
    assert len(fake_openai.chat_requests) == 3 and fake_openai.chat_requests[2].step == "reply"
    fresh = ChatClient(client.config, ResponseCache(client.config.cache_path))
    fresh.chat([{"role": "user", "content": LONG[0]["content"] + " next run"}], agent="coder")
    assert len(fake_openai.refused) == 1


def test_prompt_alone_past_the_window_is_trimmed_to_fit(fake_openai):
    fake_openai.serve(VLLM(max_model_len=4096))
    fake_openai.script([reply("ok")])
    log = "frame in triton/compiler.py line 12\n" * 1500
    messages = [
        {"role": "system", "content": "You are the coder."},
        {"role": "user", "content": "old feedback " + log, "trim": 1, "trim_mode": "head_tail"},
        {"role": "user", "content": "Write the kernel."},
    ]
    client = client_for(fake_openai, model="local-model", context_window=65536)
    assert client.chat(messages, agent="coder").text == "ok"
    refused, answered = fake_openai.chat_requests
    assert prompt_tokens_of(refused.body) >= 4096  # "your request has N input tokens"
    assert prompt_tokens_of(answered.body) + answered.body["max_tokens"] <= 4096
    assert "trimmed to fit" in answered.messages[1]["content"]


def test_setting_only_the_context_window_leaves_the_prompt_room():
    config = LLMConfig(model="my-local-model", base_url="http://x/v1", context_window=8192)
    assert config.prompt_budget > 3000  # was 256: the default 8192-token output reserve
    small = LLMConfig(model="my-local-model", base_url="http://x/v1", context_window=600)
    err = PromptTooLarge(900, small.prompt_budget, 600)
    assert "--context-window" in str(err) and "--max-output-tokens" in str(err)


def test_openai_output_cap_is_learned_from_its_error(fake_openai):
    cap = (
        "max_tokens is too large: 8192. This model supports at most 4096 completion tokens, "
        "whereas you provided 8192."
    )
    fake_openai.script([error(400, cap, param="max_tokens"), reply("ok"), reply("ok 2")])
    client = client_for(fake_openai, model="gpt-4-0613", context_window=32768)
    assert client.chat(USER, agent="coder").text == "ok"
    client.chat([{"role": "user", "content": "again"}], agent="coder")
    budgets = [r.body["max_tokens"] for r in fake_openai.chat_requests]
    assert budgets == [8192, 4096, 4096] and "max_completion_tokens" not in str(budgets)


def test_context_limits_reads_the_documented_wordings():
    new = context_limits(
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum "
        "context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - "
        "2778). (parameter=max_tokens, value=8000)"
    )
    assert (new.window, new.prompt_tokens) == (4096, 2778)
    old = context_limits(
        "This model's maximum context length is 16384 tokens. However, you requested 122946 "
        "tokens (112946 in the messages, 10000 in the completion)."
    )
    assert (old.window, old.prompt_tokens) == (16384, 112946)
    assert context_limits("Unsupported parameter: 'max_tokens'") is None


# -- 3. finish_reason --------------------------------------------------------------------------
KERNEL = "import triton\n" + "".join(f"x{i} = {i}  # a line of the file\n" for i in range(60))


def test_a_reply_cut_at_the_output_limit_is_continued_and_joined(fake_openai):
    whole = f"The kernel:\n```python\n{KERNEL}```\n"
    cut = len(whole) // 2
    # The model repeats its last line and reopens the fence: both are dropped at the join.
    line_start = whole.rfind("\n", 0, cut) + 1
    again = "```python\n" + whole[line_start:]
    fake_openai.script([reply(whole[:cut], finish_reason="length"), reply(again)])
    events: list[dict] = []
    got = client_for(fake_openai, events).chat(USER, agent="coder")
    assert got.text == whole and got.continuations == 1 and not got.truncated
    second = fake_openai.chat_requests[1]
    assert second.messages[-2] == {"role": "assistant", "content": whole[:cut]}
    assert second.messages[-1]["content"] == CONTINUE_INSTRUCTION
    [note] = named(events, "llm.truncated")
    assert note["complete"] and note["max_tokens"] == 8192


def test_a_reply_still_cut_after_the_continuations_is_marked_truncated(fake_openai):
    fake_openai.script([reply("x = 1\n" * 200, times=None)])
    client = client_for(fake_openai, max_output_tokens=100)  # the server cuts at 400 chars
    got = client.chat(USER, agent="coder")
    assert got.truncated and got.continuations == 2 and len(fake_openai.chat_requests) == 3
    assert client.ledger.total().calls == 1  # one call, three billed requests


def test_content_filter_is_said_and_never_repeated(fake_openai):
    fake_openai.script([content_filtered()])
    events: list[dict] = []
    client = client_for(fake_openai, events)
    with pytest.raises(LLMError) as info:
        client.chat(USER, agent="coder")
    assert info.value.kind == "content_filter" and "content filter" in str(info.value)
    assert len(fake_openai.chat_requests) == 1
    assert client.ledger.total().failures == {"content_filter": 1}
    assert client.ledger.total().prompt_tokens > 0  # the filtered reply was still billed


def test_azure_prompt_filter_400_is_not_repeated(fake_openai):
    fake_openai.script([azure_prompt_filtered()])
    with pytest.raises(LLMError) as info:
        client_for(fake_openai).chat(USER, agent="coder")
    assert info.value.kind == "content_filter" and len(fake_openai.chat_requests) == 1


def test_a_budget_spent_on_reasoning_is_raised_within_the_window(fake_openai):
    thinking = "Let me think about the tiling. " * 200  # ~1.5k tokens (the server's count)
    fake_openai.script([reply("", reasoning=thinking, finish_reason="length"), reply("done")])
    events: list[dict] = []
    got = client_for(fake_openai, events, model="o4-mini").chat(USER, agent="coder")
    assert got.text == "done" and thinking.strip() in got.reasoning
    first, second = fake_openai.chat_requests
    assert first.body["max_completion_tokens"] == 8192
    assert second.body["max_completion_tokens"] == 4 * 8192  # within o4-mini's 200k window
    assert [e["action"] for e in named(events, "llm.truncated")] == ["raised"]


def test_no_room_to_raise_a_budget_spent_on_reasoning_fails_with_what_to_do(fake_openai):
    fake_openai.script([reply("the answer", reasoning="Let me think. " * 600)])
    client = client_for(fake_openai, model="o4-mini", max_output_tokens=1000)  # the user's cap
    with pytest.raises(LLMError) as info:
        client.chat(USER, agent="coder")  # the server cuts it: all 1000 tokens are reasoning
    assert info.value.kind == "length" and "on reasoning and returned no text" in str(info.value)
    assert "--max-output-tokens" in str(info.value) and len(fake_openai.chat_requests) == 1


# -- 4. what a reasoning model under another name accepts is remembered ------------------------
def test_a_reasoning_model_alias_costs_its_400s_once_per_endpoint(fake_openai):
    fake_openai.serve(ReasoningModel())
    fake_openai.script([reply("ok", times=None)])
    config = LLMConfig.from_env(model="kw-o3-deployment")
    cache = ResponseCache(config.cache_path)
    endpoints = Endpoints(cache)  # one run: every agent step builds its own client
    for i in range(3):
        client = ChatClient(config, cache, endpoints=endpoints)
        client.chat([{"role": "user", "content": f"step {i}"}], agent="planner")
    assert len(fake_openai.refused) == 2  # max_tokens, then temperature: once for the run
    answered = fake_openai.chat_requests[-1].body
    assert "max_completion_tokens" in answered and "temperature" not in answered
    events: list[dict] = []
    ChatClient(config, cache, events.append, endpoints=Endpoints(cache)).chat(
        [{"role": "user", "content": "next run"}], agent="coder"
    )
    assert len(fake_openai.refused) == 2  # the next run starts from what the cache kept
    [remembered] = named(events, "llm.remembered")
    assert "max_completion_tokens" in remembered["facts"] and "temperature" in remembered["facts"]


# -- 5. reasoning blocks are split off before parsing ------------------------------------------
THOUGHT = "The plan: ```python\nclass ModelNew: pass\n``` and {not json}"


@pytest.mark.parametrize(
    "text",
    [
        f"<think>\n{THOUGHT}\n</think>\n\n{PLAN}",
        f"{THOUGHT}\n</think>\n{PLAN}",  # R1's template opened the block itself
        f"<thinking>{THOUGHT}</thinking>```json\n{PLAN}\n```",
    ],
    ids=["think", "no-opening-tag", "thinking"],
)
def test_think_blocks_do_not_break_json(fake_openai, text):
    fake_openai.script([reply(text)])
    plan, got = client_for(fake_openai).structured(USER, Plan, agent="planner")
    assert plan.summary == "fuse" and len(fake_openai.chat_requests) == 1  # no repair
    assert "class ModelNew" in got.reasoning and "think" not in got.text


def test_reasoning_content_is_kept_apart_streamed_or_not(fake_openai):
    fake_openai.script([reply(PLAN, reasoning=THOUGHT), reply(PLAN, reasoning="r2")])
    plan, got = client_for(fake_openai, stream=False).structured(USER, Plan, agent="planner")
    assert plan.summary == "fuse" and got.text == PLAN and got.reasoning == THOUGHT
    streamed = client_for(fake_openai, stream=True, use_cache=False)
    got = streamed.chat([{"role": "user", "content": "other"}], agent="planner")
    assert (got.text, got.reasoning) == (PLAN, "r2")


def test_split_reasoning_leaves_plain_text_untouched():
    assert split_reasoning("x = 1\n") == ("x = 1\n", "")
    assert split_reasoning("<think>unfinished thoughts") == ("", "unfinished thoughts")


# -- 7. timeouts: one retry, streamed; a time budget per call ----------------------------------
def test_a_timed_out_generation_is_retried_once_and_streamed(fake_openai):
    fake_openai.script([stall(times=None)])
    events: list[dict] = []
    client = client_for(fake_openai, events, stream=False, max_retries=4)
    with pytest.raises(LLMError) as info:
        client.chat(USER, agent="coder")
    assert info.value.kind == "timeout" and len(fake_openai.chat_requests) == 2
    assert [r.stream for r in fake_openai.chat_requests] == [False, True]
    assert "retried 1 time(s) at most" in str(info.value)


def test_a_slow_streamed_generation_is_not_cut_by_the_timeout(fake_openai):
    # 2 s of generation, tokens every ~0.1 s: longer than the 1 s timeout, never silent for it.
    fake_openai.script([reply("a long kernel " * 40, generation_s=2.0)])
    got = client_for(fake_openai).chat(USER, agent="coder")
    assert got.text.startswith("a long kernel") and got.attempts == 1


def test_retries_stop_when_the_call_budget_is_spent(fake_openai):
    fake_openai.script([error(503, headers={"Retry-After": "1"}, times=None)])
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        client_for(fake_openai, call_budget_s=1.5).chat(USER, agent="coder")
    assert time.monotonic() - started < 2.5 and len(fake_openai.chat_requests) == 2
    assert "retry budget of 1.5 s is spent" in str(info.value)


# -- the circuit breaker (issue 13) --------------------------------------------------------------
def test_the_breaker_stops_calling_after_three_failed_calls(fake_openai):
    fake_openai.script([error(500, "upstream is down", times=None)])
    events: list[dict] = []
    client = client_for(fake_openai, events, max_retries=1)
    for _ in range(3):
        with pytest.raises(LLMError):
            client.chat(USER, agent="coder")
    assert len(fake_openai.chat_requests) == 6  # three calls, one retry each
    [opened] = named(events, "llm.circuit_open")
    assert opened["failures"] == 3 and "upstream is down" in opened["error"]
    sibling = client.with_model(client.config.model)  # another agent step of the same run
    with pytest.raises(LLMError) as info:
        sibling.chat(USER, agent="planner")
    assert info.value.circuit_open and "not called again" in str(info.value)
    assert len(fake_openai.chat_requests) == 6  # not sent
    per_agent = client.ledger.by_agent()
    assert (per_agent["coder"].failed_calls, per_agent["coder"].failures) == (3, {"server": 3})
    assert per_agent["planner"].refused_calls == 1 and per_agent["coder"].retries == 3


def test_a_success_resets_the_breaker(fake_openai):
    fake_openai.script([error(500), error(500), reply("ok"), error(500), error(500), reply("ok")])
    client = client_for(fake_openai, max_retries=0, use_cache=False)
    outcomes = []
    for i in range(6):
        try:
            outcomes.append(client.chat([{"role": "user", "content": str(i)}], agent="x").text)
        except LLMError as e:
            outcomes.append(e.kind)
    assert outcomes == ["server", "server", "ok", "server", "server", "ok"]
    assert client.endpoint.open_error is None


# -- issue 25: vLLM's older wording, a server that ignores stream: true -------------------------
OLD_VLLM = (
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
    "(5000 in the messages, 4000 in the completion). Please reduce the length of the messages "
    "or completion."
)


def test_older_vllm_wording_is_refit_with_the_servers_own_prompt_count(fake_openai):
    # The server's chat template counts the prompt 5000 where tiktoken counts a few hundred
    # (more than the 4x the learned ratio is bounded to): the retry must leave 5000 tokens.
    body = {"object": "error", "message": OLD_VLLM, "type": "BadRequestError", "param": None}
    fake_openai.script([error(400, body=body), reply("ok")])
    events: list[dict] = []
    client = client_for(fake_openai, events, model="qwen2.5-coder-32b", max_output_tokens=4000)
    messages = [{"role": "user", "content": "Write the kernel for this task. " * 60}]
    assert client.chat(messages, agent="coder").text == "ok"
    refused, answered = fake_openai.chat_requests
    assert refused.body["max_tokens"] == 4000
    assert 16 <= answered.body["max_tokens"] <= 8192 - 5000
    [learned] = named(events, "llm.window")
    assert learned["window"] == 8192 and learned["server_prompt_tokens"] == 5000
    assert learned["now_max_tokens"] == answered.body["max_tokens"]


def test_a_server_that_ignores_stream_is_read_as_one_completion_and_not_asked_again(
    fake_openai,
):
    fake_openai.streams = False
    fake_openai.script([reply("first", usage=(12, 3)), reply("second")])
    events: list[dict] = []
    client = client_for(fake_openai, events, stream=True)
    got = client.chat(USER, agent="coder")
    assert got.text == "first" and got.attempts == 1 and got.prompt_tokens == 12
    [fallback] = named(events, "llm.param_fallback")
    assert fallback["param"] == "stream" and not named(events, "llm.retry")
    assert client.chat([{"role": "user", "content": "again"}], agent="coder").text == "second"
    first, second = fake_openai.chat_requests
    assert first.stream and not second.stream and "stream_options" not in second.body
