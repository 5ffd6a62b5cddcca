"""ChatClient: thread-safe chat calls for one model, with retries, refits, continuations, cache."""

from __future__ import annotations

import dataclasses
import math
import random
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pydantic

from .cache import ResponseCache, cache_entry
from .config import (
    MIN_PROMPT_BUDGET,
    PROMPT_MARGIN_TOKENS,
    UNKNOWN_TOKENIZER_HEADROOM,
    LLMConfig,
    is_reasoning_model,
    min_output_reserve,
    prompt_budget_for,
)
from .endpoints import Endpoints, weaker_format
from .errors import (
    ContextLimits,
    Failure,
    LLMError,
    PromptTooLarge,
    classify_error,
    context_limits,
    downgrade_for,
)
from .fit import fit_messages
from .messages import EventSink, Message
from .replies import (
    CONTINUE_INSTRUCTION,
    ChatReply,
    ModelT,
    continuation_text,
    join_texts,
    merge_replies,
    parse_structured,
    repair_instruction,
    response_format_for,
    split_reasoning,
    structured_instruction,
)
from .retry import retry_plan
from .sdk import build_openai_client, read_completion, read_stream, unstreamed_completion
from .tokens import count_tokens, has_known_tokenizer
from .usage import AgentUsage, UsageLedger

if TYPE_CHECKING:
    import openai


# A reply cut at the output limit is continued at most this often (each is billed).
MAX_CONTINUATIONS = 2

_AUTH_HINT = (
    "set OPENAI_API_KEY to a valid key (AZURE_OPENAI_API_KEY for Azure), or run with "
    "--model offline to use the rule-based agents"
)
_CONTENT_FILTER = (
    "the provider's content filter blocked the reply (finish_reason content_filter); the same "
    "request would be filtered and billed again, so it is not repeated"
)


class ChatClient:
    """Thread-safe chat calls for one model; siblings from with_model() share cache, limits and
    what the endpoints taught the run."""

    def __init__(
        self,
        config: LLMConfig,
        cache: ResponseCache | None = None,
        on_event: EventSink | None = None,
        *,
        ledger: UsageLedger | None = None,
        limiter: threading.BoundedSemaphore | None = None,
        endpoints: Endpoints | None = None,
    ) -> None:
        self.config = config
        if cache is None and config.cache_path:
            cache = ResponseCache(config.cache_path)
        self.cache = cache
        self.on_event = on_event
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.limiter = limiter or threading.BoundedSemaphore(max(1, config.max_concurrency))
        if endpoints is None:
            endpoints = Endpoints(cache, read_stored=config.use_cache)
        self.endpoints = endpoints
        self.endpoint, remembered = self.endpoints.state(config)
        self._lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        self._random = random.Random()
        if remembered:
            self._emit(
                "llm.remembered",
                endpoint=self.endpoint.endpoint,
                model=config.model,
                facts=self.endpoint.facts().describe(),
            )

    # -- construction ------------------------------------------------------------------------
    def with_model(self, model: str, **changes: Any) -> ChatClient:
        """A client for another model (a role) sharing cache, ledger, limiter and events."""
        config = dataclasses.replace(self.config, model=model, **changes)
        if "temperature" not in changes and is_reasoning_model(model):
            config = dataclasses.replace(config, temperature=None)
        return ChatClient(
            config,
            self.cache,
            self.on_event,
            ledger=self.ledger,
            limiter=self.limiter,
            endpoints=self.endpoints,
        )

    @property
    def openai_client(self) -> openai.OpenAI:
        """The SDK client (OpenAI or AzureOpenAI); its own retries are off, ours are logged."""
        with self._lock:
            if self._client is None:
                self._client = build_openai_client(self.config)
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- public calls ------------------------------------------------------------------------
    def chat(
        self,
        messages: Sequence[Message],
        *,
        agent: str,
        json_schema: type[pydantic.BaseModel] | None = None,
    ) -> ChatReply:
        """One completion. Messages may carry trim marks (fit_messages); raises LLMError."""
        if self.config.offline:
            raise LLMError(
                "auth", f"no model configured (model={self.config.model!r}): {_AUTH_HINT}"
            )
        refused = self.endpoint.open_error
        if refused is not None:
            self.ledger.record(agent, AgentUsage(refused_calls=1))
            raise LLMError(
                refused.kind,
                f"not sent: {self.endpoint.breaker_text()}",
                status=refused.status,
                circuit_open=True,
            )
        try:
            reply = self._answer(messages, agent, json_schema)
        except PromptTooLarge as err:  # nothing was sent: not the endpoint's failure
            self.ledger.record(agent, AgentUsage.failed("prompt_too_large", err.message, 0))
            self._emit("llm.error", agent=agent, kind=err.kind, message=err.message, attempts=0)
            raise
        except LLMError as err:
            self.ledger.record(
                agent, AgentUsage.failed(err.kind, err.message, err.attempts, err.usage)
            )
            if self.endpoint.failed(err):
                self._emit(
                    "llm.circuit_open",
                    agent=agent,
                    endpoint=self.endpoint.endpoint,
                    model=self.config.model,
                    failures=self.endpoint.threshold,
                    kind=err.kind,
                    status=err.status,
                    error=err.message[:500],
                )
            raise
        self.endpoint.succeeded()
        return self._finish(reply, agent)

    def structured(
        self, messages: Sequence[Message], schema: type[ModelT], *, agent: str
    ) -> tuple[ModelT, ChatReply]:
        """A reply validated against `schema`; one repair request; else LLMError("unparseable")."""
        request = [*messages, {"role": "user", "content": structured_instruction(schema)}]
        reply = self.chat(request, agent=agent, json_schema=schema)
        try:
            return parse_structured(reply.text, schema), reply
        except ValueError as err:
            first_error = str(err)
        if reply.truncated:  # a repair would ask for the same runaway reply again
            self.ledger.record(agent, AgentUsage(unusable=1))
            raise LLMError(
                "unparseable",
                f"{agent}: the reply was cut off at the output limit ({reply.max_tokens} tokens) "
                f"even after {reply.continuations} continuation(s): {first_error}",
                attempts=reply.attempts,
            )
        self._emit("llm.repair", agent=agent, error=first_error[:2000])
        repair = [
            *request,
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": repair_instruction(first_error)},
        ]
        second = self.chat(repair, agent=agent, json_schema=schema)
        reasoning = join_texts(reply.reasoning, second.reasoning)
        second = dataclasses.replace(second, repair_of=reply.text, reasoning=reasoning)
        try:
            return parse_structured(second.text, schema), second
        except ValueError as err:
            self.ledger.record(agent, AgentUsage(unusable=1))
            raise LLMError(
                "unparseable",
                f"{agent}: no valid {schema.__name__} after one repair request: {err}",
                attempts=reply.attempts + second.attempts,
            ) from err

    def list_models(self) -> list[str]:
        """Model ids the endpoint serves (GET /models); raises LLMError."""
        try:
            return sorted(m.id for m in self.openai_client.models.list())
        except Exception as err:  # any SDK/transport failure is classified the same way
            failure = classify_error(err)
            raise LLMError(failure.kind, failure.message, status=failure.status) from err

    # -- one answered call -------------------------------------------------------------------
    def _answer(
        self,
        messages: Sequence[Message],
        agent: str,
        json_schema: type[pydantic.BaseModel] | None,
    ) -> ChatReply:
        sent = self._fit(messages)
        if self.cache is not None and self.config.use_cache:
            hit = self.cache.get(self._cache_key(sent, json_schema))
            if hit is not None:
                return self._cached_reply(hit, agent, sent)
        reply = self._call_with_retries(messages, sent, agent, json_schema)
        reply = self._settle(reply, agent, json_schema)
        if self.cache is not None:  # under the prompt as finally sent (a refit changes it)
            key = self._cache_key(reply.messages, json_schema)
            self.cache.put(key, reply.model, cache_entry(reply))
        return reply

    def _cache_key(
        self, sent: list[dict[str, Any]], json_schema: type[pydantic.BaseModel] | None
    ) -> str:
        schema_name = json_schema.__name__ if json_schema is not None else None
        return ResponseCache.key(self.config.model, sent, self._sampling_params(), schema_name)

    def _settle(
        self, reply: ChatReply, agent: str, json_schema: type[pydantic.BaseModel] | None
    ) -> ChatReply:
        """Act on the finish reason: content_filter fails (never repeated), length continues."""
        if reply.finish_reason == "content_filter":
            self._emit(
                "llm.error",
                agent=agent,
                kind="content_filter",
                status=None,
                attempts=reply.attempts,
                message=_CONTENT_FILTER,
            )
            raise LLMError(
                "content_filter", _CONTENT_FILTER, attempts=reply.attempts, usage=reply.usage
            )
        if reply.finish_reason != "length":
            return reply
        if not reply.text.strip():
            reply = self._raise_budget(reply, agent, json_schema)
            if reply.finish_reason != "length":
                return reply
        return self._continue(reply, agent)

    def _raise_budget(
        self, reply: ChatReply, agent: str, json_schema: type[pydantic.BaseModel] | None
    ) -> ChatReply:
        """Ask again with a larger output budget: the first one went to reasoning (or nothing
        visible came back), so there is nothing to continue from."""
        asked = reply.max_tokens or self.config.output_limit
        ceiling = self._output_room(reply.messages)
        caps = (self.config.max_output_tokens, self.endpoint.facts().max_output_tokens)
        ceiling = min([ceiling, *[c for c in caps if c]])
        # 4x: a reasoning model that spent 8k thinking rarely needs more than 32k in all.
        raised = min(ceiling, asked * 4)
        what = "reasoning" if reply.reasoning else "nothing visible (hidden reasoning, or none)"
        if raised < asked * 1.25:
            raise LLMError(
                "length",
                f"the reply used its whole output budget ({asked} tokens) on {what} and returned "
                "no text, and the context window leaves no room for a larger one; raise "
                "--max-output-tokens (or --context-window if the server allows more), or lower "
                "the model's reasoning effort",
                attempts=reply.attempts,
                usage=reply.usage,
            )
        self._emit(
            "llm.truncated", agent=agent, max_tokens=asked, action="raised", now=raised, what=what
        )
        again = self._call_with_retries(
            reply.messages, reply.messages, agent, json_schema, max_tokens=raised
        )
        merged = merge_replies(reply, again, again.text)
        if merged.finish_reason == "length" and not merged.text.strip():
            raise LLMError(
                "length",
                f"the reply used its whole output budget on {what} again, with {raised} tokens; "
                "lower the model's reasoning effort or use a model that answers sooner",
                attempts=merged.attempts,
                usage=merged.usage,
            )
        if merged.finish_reason == "content_filter":
            return self._settle(merged, agent, json_schema)
        return merged

    def _continue(self, reply: ChatReply, agent: str) -> ChatReply:
        """Continue a reply cut at the output limit, at most MAX_CONTINUATIONS times."""
        sent, text, total = reply.messages, reply.text, reply
        continuations = 0
        while total.finish_reason == "length" and continuations < MAX_CONTINUATIONS:
            asked = [
                *sent,
                {"role": "assistant", "content": text},
                {"role": "user", "content": CONTINUE_INSTRUCTION},
            ]
            if self._output_room(asked) < MIN_PROMPT_BUDGET:  # the cut reply fills the window
                break
            try:
                more = self._call_with_retries(asked, asked, agent, None)
            except LLMError as err:  # the cut reply is kept, marked truncated
                self._emit(
                    "llm.continuation_failed", agent=agent, kind=err.kind, message=err.message[:500]
                )
                break
            continuations += 1
            text += continuation_text(text, more.text)
            total = merge_replies(total, more, text)
            if total.finish_reason == "content_filter":
                self._settle(total, agent, None)
        done = total.finish_reason != "length"
        self._emit(
            "llm.truncated",
            agent=agent,
            max_tokens=reply.max_tokens,
            action="continued",
            continuations=continuations,
            complete=done,
        )
        return dataclasses.replace(
            total,
            messages=sent,
            max_tokens=reply.max_tokens,
            continuations=continuations,
            truncated=not done,
        )

    # -- budgets -----------------------------------------------------------------------------
    def _window(self) -> int:
        """The context window: what the server stated, else the configured or known one."""
        return self.endpoint.facts().context_window or self.config.window

    def _fit(self, messages: Sequence[Message], ratio: float | None = None) -> list[dict[str, Any]]:
        """The prompt fitted to the window less the reply's reserve; when its protected parts
        need more, to the window less MIN_OUTPUT_RESERVE (the reply then gets what is left).
        `ratio`: the server's count over tiktoken's for this call (default: the learned one)."""
        facts = self.endpoint.facts()
        window = facts.context_window or self.config.window
        ratio = ratio or facts.token_ratio
        budget = prompt_budget_for(self.config, window, ratio)
        try:
            return fit_messages(messages, self.config.model, budget)
        except PromptTooLarge:
            pass
        least = dataclasses.replace(self.config, max_output_tokens=min_output_reserve(window))
        budget = max(budget, prompt_budget_for(least, window, ratio))
        try:
            return fit_messages(messages, self.config.model, budget)
        except PromptTooLarge as err:
            raise PromptTooLarge(err.needed, err.budget, window) from None

    def _server_count(self, sent: Sequence[Message]) -> int:
        """The prompt's tokens as the server will count them (tiktoken, scaled)."""
        ours = count_tokens(sent, self.config.model)
        ratio = self.endpoint.facts().token_ratio
        if ratio:
            return math.ceil(ours * ratio)
        if has_known_tokenizer(self.config.model):
            return ours
        return math.ceil(ours / UNKNOWN_TOKENIZER_HEADROOM)

    def _output_room(self, sent: Sequence[Message]) -> int:
        """Output tokens the window leaves after this prompt."""
        return self._window() - self._server_count(sent) - PROMPT_MARGIN_TOKENS

    def _output_budget(self, sent: Sequence[Message], ask: int | None = None) -> int:
        """max_tokens for a request: the limit asked for, within the room the window leaves and
        the server's cap. 16 at least: a prompt that overflows is the server's to reject (its
        error states the window, and the prompt is fitted again)."""
        limit = ask or self.config.output_limit
        cap = self.endpoint.facts().max_output_tokens
        if cap:
            limit = min(limit, cap)
        return max(min(limit, self._output_room(sent)), 16)

    # -- internals ---------------------------------------------------------------------------
    def _sampling_params(self) -> dict[str, Any]:
        """What changes the reply (the cache key): temperature, output length, seed."""
        return {
            "temperature": self.config.temperature,
            "max_output_tokens": self.config.output_limit,
            "seed": self.config.seed,
        }

    def _request_params(
        self,
        messages: list[dict[str, Any]],
        json_schema: type[pydantic.BaseModel] | None,
        max_tokens: int,
        stream: bool,
    ) -> dict[str, Any]:
        facts = self.endpoint.facts()
        dropped = set(facts.dropped)
        default_key = (
            "max_completion_tokens" if is_reasoning_model(self.config.model) else "max_tokens"
        )
        params: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if self.config.temperature is not None and "temperature" not in dropped:
            params["temperature"] = self.config.temperature
        params[facts.max_tokens_key or default_key] = max_tokens
        if self.config.seed is not None and "seed" not in dropped:
            params["seed"] = self.config.seed
        mode = weaker_format(self.config.response_format, facts.response_format)
        if json_schema is not None and mode != "none":
            params["response_format"] = response_format_for(json_schema, mode)
        if stream and "stream" not in dropped:
            params["stream"] = True
            if "stream_options" not in dropped:
                params["stream_options"] = {"include_usage": True}
        return params

    def _call_with_retries(
        self,
        original: Sequence[Message],
        sent: list[dict[str, Any]],
        agent: str,
        json_schema: type[pydantic.BaseModel] | None,
        *,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """One request, retried. `original`: the unfitted messages, fitted again when the server
        states a smaller window than we assumed (once per call).

        Not the SDK's max_retries (it is 0, see build_openai_client): that loop logs no event per
        retry and counts no attempts, retries every 429 (insufficient_quota too) and every
        timeout, waits out a Retry-After of up to two minutes where we give up past retry_max_s,
        knows no call budget, and never retries a stream cut after its first byte."""
        attempts, failures, timeouts = 0, 0, 0
        refitted, stream = False, self.config.stream
        room: int | None = None  # after a refit: the output room the server's own count leaves
        downgrades: set[tuple[str, Any]] = set()  # each at most once per call: no ping-pong
        started = time.monotonic()  # latency_s: what the caller waited, retries included
        while True:
            attempts += 1
            budget = self._output_budget(sent, max_tokens)
            if room is not None:
                budget = max(min(budget, room), 16)
            params = self._request_params(sent, json_schema, budget, stream)
            try:
                with self.limiter:
                    reply = self._request(params, agent)
                return dataclasses.replace(
                    reply,
                    attempts=attempts,
                    retries=attempts - 1,
                    latency_s=time.monotonic() - started,
                    messages=sent,
                    max_tokens=budget,
                )
            except Exception as err:  # classified below; unknown errors are re-raised
                failure = err if isinstance(err, Failure) else classify_error(err)
            if failure.kind == "bad_request":
                limits = context_limits(failure.message)
                if limits is not None and not refitted:
                    refitted = True
                    sent, room = self._refit(original, sent, limits, failure, agent, max_tokens)
                    continue  # the same request, fitted to the window the server stated
                if limits is None and self._downgrade(params, failure, agent, downgrades):
                    continue  # an optional parameter was rejected: same request without it
            failures += 1
            if failure.kind == "timeout":
                timeouts += 1
                stream = True  # the retry streams: a slow model that is generating survives
            reason, wait = retry_plan(
                self.config, failure, failures, timeouts, started, self._random
            )
            if reason is not None:
                raise self._give_up(failure, agent, attempts, reason)
            self._emit(
                "llm.retry",
                agent=agent,
                attempt=attempts,
                kind=failure.kind,
                status=failure.status,
                wait_s=round(wait, 3),
                stream=stream,
                message=failure.message[:500],
            )
            time.sleep(wait)

    def _refit(
        self,
        original: Sequence[Message],
        sent: list[dict[str, Any]],
        limits: ContextLimits,
        failure: Failure,
        agent: str,
        max_tokens: int | None,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Learn the limits a context-length error states; the prompt fitted to them, and the
        output room the server's own count of it leaves (None when it stated no count).

        The learned ratio is bounded (one odd count must not starve every later call), so the
        retry's room comes from the stated count itself: vLLM's older wording ("you requested
        9000 tokens (5000 in the messages, 4000 in the completion)") of a prompt its template
        makes 5x longer than tiktoken's count was refused twice with the bounded ratio."""
        ratio, ours = None, count_tokens(sent, self.config.model)
        if limits.prompt_tokens:  # the server's count of the very prompt we sent
            ratio = round(min(max(limits.prompt_tokens / max(ours, 1), 0.5), 4.0), 3)
        self.endpoint.learn(
            context_window=limits.window, max_output_tokens=limits.max_output, token_ratio=ratio
        )
        stated = limits.prompt_tokens / max(ours, 1) if limits.prompt_tokens else None
        fitted = self._fit(original, stated)
        room = None
        if stated is not None:
            server_prompt = math.ceil(count_tokens(fitted, self.config.model) * stated)
            room = self._window() - server_prompt - PROMPT_MARGIN_TOKENS
        self._emit(
            "llm.window",
            agent=agent,
            endpoint=self.endpoint.endpoint,
            model=self.config.model,
            window=limits.window,
            server_prompt_tokens=limits.prompt_tokens,
            max_output=limits.max_output,
            now_max_tokens=self._output_budget(fitted, max_tokens)
            if room is None
            else max(min(self._output_budget(fitted, max_tokens), room), 16),
            prompt_trimmed=fitted != sent,
            message=failure.message[:500],
        )
        return fitted, room

    def _request(self, params: dict[str, Any], agent: str) -> ChatReply:
        response = self.openai_client.chat.completions.create(**params)
        unstreamed = unstreamed_completion(response) if params.get("stream") else None
        if unstreamed is not None:  # it ignored stream: true; not asked again in this run
            if self.endpoint.drop("stream"):
                self._emit(
                    "llm.param_fallback",
                    agent=agent,
                    model=self.config.model,
                    param="stream",
                    now=None,
                    message="the server answered a stream request with one application/json "
                    "completion: it does not stream",
                )
            raw, reasoning, finish, usage = read_completion(unstreamed)
        elif params.get("stream"):
            raw, reasoning, finish, usage = read_stream(response)
        else:
            raw, reasoning, finish, usage = read_completion(response)
        text, inline = split_reasoning(raw)
        estimated = usage is None
        if usage is None:
            usage = (
                count_tokens(params["messages"], self.config.model),
                count_tokens(raw + reasoning, self.config.model),
            )
        return ChatReply(
            text=text,
            model=self.config.model,
            prompt_tokens=usage[0],
            completion_tokens=usage[1],
            cost_usd=self.config.cost_usd(*usage),
            cached=False,
            latency_s=0.0,
            attempts=1,
            agent=agent,
            finish_reason=finish,
            usage_estimated=estimated,
            reasoning=join_texts(reasoning, inline),
        )

    def _downgrade(
        self,
        params: Mapping[str, Any],
        failure: Failure,
        agent: str,
        done: set[tuple[str, Any]],
    ) -> bool:
        """Drop or weaken one optional parameter the endpoint rejected; False if none applies.

        The change holds for the whole run (every client of it) and is stored with the reply
        cache for later runs: the endpoint will not change its mind.
        """
        change = downgrade_for(failure, params)
        if change is None or change in done:
            return False
        done.add(change)
        name, value = change
        if name == "response_format":
            self.endpoint.weaken_format(value)
        elif name == "max_tokens":
            self.endpoint.learn(max_tokens_key=value)
        else:
            self.endpoint.drop(name)
        self._emit(
            "llm.param_fallback",
            agent=agent,
            model=self.config.model,
            param=name,
            now=value,
            message=failure.message[:500],
        )
        return True

    def _give_up(self, failure: Failure, agent: str, attempts: int, reason: str) -> LLMError:
        message = failure.message
        if failure.kind == "auth":
            message = f"{message} -- {_AUTH_HINT}"
        elif failure.status == 404:
            message = f"{message} -- check --model{self._served_models_hint()}"
        elif failure.retryable:
            message = f"{message} (gave up after {attempts} attempts: {reason})"
        fields = {"kind": failure.kind, "status": failure.status, "attempts": attempts}
        self._emit("llm.error", agent=agent, message=message[:1000], **fields)
        return LLMError(failure.kind, message, status=failure.status, attempts=attempts)

    def _served_models_hint(self) -> str:
        try:
            models = self.list_models()
        except LLMError:
            return ""
        return f"; the server offers: {', '.join(models[:20])}" if models else ""

    def _cached_reply(self, hit: Mapping[str, Any], agent: str, sent: list[dict]) -> ChatReply:
        return ChatReply(
            text=hit["text"],
            model=hit.get("model", self.config.model),
            prompt_tokens=int(hit.get("prompt_tokens", 0)),
            completion_tokens=int(hit.get("completion_tokens", 0)),
            cost_usd=0.0,
            cached=True,
            latency_s=0.0,
            attempts=0,
            agent=agent,
            finish_reason=hit.get("finish_reason"),
            usage_estimated=bool(hit.get("usage_estimated", False)),
            messages=sent,
            reasoning=str(hit.get("reasoning") or ""),
            max_tokens=hit.get("max_tokens"),
            continuations=int(hit.get("continuations") or 0),
            truncated=bool(hit.get("truncated", False)),
        )

    def _finish(self, reply: ChatReply, agent: str) -> ChatReply:
        """Record usage in the ledger and the event log."""
        self.ledger.record(agent, reply.usage)
        if not reply.cached and self.config.price() is None:
            self.ledger.note(f"no price known for model {self.config.model!r}: cost counted as 0")
        self._emit(
            "llm.call",
            agent=agent,
            model=reply.model,
            cached=reply.cached,
            attempts=reply.attempts,
            retries=reply.retries,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            usage_estimated=reply.usage_estimated,
            cost_usd=round(reply.cost_usd, 6),
            latency_s=round(reply.latency_s, 3),
            finish_reason=reply.finish_reason,
            max_tokens=reply.max_tokens,
            continuations=reply.continuations,
            truncated=reply.truncated,
            reasoning_chars=len(reply.reasoning),
        )
        return reply

    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            ts = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
            self.on_event({"ts": ts, "event": event, **fields})
