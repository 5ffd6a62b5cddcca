"""A scripted OpenAI-compatible HTTP server for tests: the real openai client talks to it.

Tests script what the "model" does, call by call, and then assert what was sent:

    from fake_openai import drop, error, reply, stall

    def test_retry(fake_openai):  # the fixture: server started, OPENAI_* env pointing at it
        fake_openai.script([error(429, headers={"Retry-After": "1"}), reply("hello")])
        ...  # code under test calls the chat API
        assert len(fake_openai.requests) == 2

Steps are consumed in order, one per POST .../chat/completions. A step is a `reply` (content,
optional usage, reasoning beside the content, a finish_reason, streamed as SSE when the request
asks for it, generated over `generation_s`), an `error` (status, JSON body, headers such as
Retry-After), a `stall` (sleeps past the client's timeout before replying), a `drop` (closes the
connection without an answer) or `garbage` (HTTP 200 whose body is not JSON). Malformed JSON
*content* is just `reply('{"broken": ')`. Like every real server, a reply longer than the
request's max_tokens (counted as characters / 4) is cut there with finish_reason "length".

Providers' documented failures, as they send them: `azure_rate_limit` (Azure's transient 429
with Retry-After, whose text links to a quota page), `openai_rate_limit`, `openai_quota`
(insufficient_quota), `azure_prompt_filtered` (400 content_filter), `content_filtered` (Azure's
200 with content null), `not_implemented` (501). Request-checking modes stand in front of the
script, as a server validates a request before generating: `fake.serve(VLLM(max_model_len=8192))`
(vLLM's context-length 400s, old or new wording) and `fake.serve(ReasoningModel())` (an o-series
model under a name the client does not know: max_tokens and temperature refused).

Routing: `route("You are the planner", steps)` gives requests whose system prompt contains that
substring their own queue, so a graph test scripts planner, coder and critic independently;
other requests take the shared `script(...)` queue. A request that finds its queue empty gets a
400 ("script exhausted", not retried by the client) and is listed in `.unexpected`.

Test files get the fixture with `pytest_plugins = ["fake_openai"]` (or from tests/conftest.py).
PYTEST_DONT_REWRITE: they import this module before pytest registers it as a plugin, and it has
no test assertions to rewrite.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

# Env vars the fixture clears so the developer's own settings never leak into a test.
_ENV_TO_CLEAR = (
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_API_VERSION",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_OPENAI_DEPLOYMENT",
    "KERNELWRIGHT_AZURE",
    "KERNELWRIGHT_PRICES",
    "KERNELWRIGHT_STREAM",
    "KERNELWRIGHT_NO_CACHE",
    "KERNELWRIGHT_CONTEXT_WINDOW",
    "KERNELWRIGHT_MAX_OUTPUT_TOKENS",
    "KERNELWRIGHT_RESPONSE_FORMAT",
    "KERNELWRIGHT_MAX_CONCURRENCY",
    "KERNELWRIGHT_MAX_RETRIES",
    "KERNELWRIGHT_LLM_MAX_RETRIES",
    "KERNELWRIGHT_RAY_MAX_RETRIES",
    "KERNELWRIGHT_TEMPERATURE",
    "KERNELWRIGHT_SEED",
    "KERNELWRIGHT_PLANNER_MODEL",
    "KERNELWRIGHT_CODER_MODEL",
    "KERNELWRIGHT_CRITIC_MODEL",
    "KERNELWRIGHT_CALL_BUDGET_S",
    "KERNELWRIGHT_BREAKER_FAILURES",
    "KERNELWRIGHT_FALLBACK_OFFLINE",
    *(
        f"KERNELWRIGHT_{role}_{setting}"
        for role in ("PLANNER", "CODER", "CRITIC")
        for setting in ("CONTEXT_WINDOW", "MAX_OUTPUT_TOKENS")
    ),
)

FAKE_API_KEY = "sk-fake-test-key"
FAKE_MODEL = "gpt-4o-mini"  # a model with a known price and context window


@dataclass(frozen=True)
class Step:
    """One scripted server behaviour; build it with reply/error/stall/drop/garbage."""

    kind: str  # "reply" | "error" | "stall" | "drop" | "garbage"
    content: str | None = ""  # None: a reply whose content was withheld (Azure's filter)
    # (prompt, completion) tokens; None: a chars/4 estimate; False: no usage at all
    usage: tuple[int, int] | bool | None = None
    finish_reason: str = "stop"
    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    times: int | None = 1  # None: never used up
    reasoning: str = ""  # sent beside the content, in `reasoning_field`
    reasoning_field: str = "reasoning_content"  # vLLM/DeepSeek; Ollama and newer vLLM: reasoning
    generation_s: float = 0.0  # streamed: spread over the pieces; else before the answer
    extra: Mapping[str, Any] = field(default_factory=dict)  # more keys of the choice


def reply(
    content: str | None,
    *,
    usage: tuple[int, int] | bool | None = None,
    finish_reason: str = "stop",
    delay_s: float = 0.0,
    times: int | None = 1,
    reasoning: str = "",
    reasoning_field: str = "reasoning_content",
    generation_s: float = 0.0,
) -> Step:
    """A successful completion. usage=(prompt_tokens, completion_tokens); False sends none.

    `generation_s`: how long the model takes to write it. Streamed, the pieces arrive spread
    over that time (a slow model that keeps sending tokens); not streamed, the whole answer
    arrives after it (a client timeout shorter than that fires)."""
    return Step(
        "reply",
        content=content,
        usage=usage,
        finish_reason=finish_reason,
        delay_s=delay_s,
        times=times,
        reasoning=reasoning,
        reasoning_field=reasoning_field,
        generation_s=generation_s,
    )


# -- what providers send, as they document it --------------------------------------------------
def azure_rate_limit(
    retry_after_s: int = 2, *, api_version: str = "2024-10-21", times: int | None = 1
) -> Step:
    """Azure OpenAI's 429 on a deployment's tokens-per-minute limit: transient, with Retry-After
    (and retry-after-ms), though its text links to the quota-increase page."""
    message = (
        f"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
        f"{api_version} have exceeded token rate limit of your current OpenAI S0 pricing tier. "
        f"Please retry after {retry_after_s} seconds. Please go here: "
        "https://aka.ms/oai/quotaincrease if you would like to further increase the default "
        "rate limit."
    )
    headers = {
        "retry-after": str(retry_after_s),
        "retry-after-ms": str(retry_after_s * 1000),
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-remaining-tokens": "0",
    }
    body = {"error": {"code": "429", "message": message}}
    return Step("error", status=429, body=body, headers=headers, times=times)


def openai_rate_limit(*, times: int | None = 1) -> Step:
    """OpenAI's 429 on a tokens-per-minute limit (code rate_limit_exceeded); the wait is in the
    x-ratelimit-reset-* headers and the text, not in Retry-After."""
    message = (
        "Rate limit reached for gpt-4o-mini in organization org-fake on tokens per min (TPM): "
        "Limit 200000, Used 199500, Requested 1200. Please try again in 210ms. Visit "
        "https://platform.openai.com/account/rate-limits to learn more."
    )
    body = {
        "error": {
            "message": message,
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    headers = {"x-ratelimit-reset-tokens": "210ms", "x-ratelimit-remaining-tokens": "0"}
    return Step("error", status=429, body=body, headers=headers, times=times)


def openai_quota(*, times: int | None = 1) -> Step:
    """OpenAI's 429 when the account has no credit left: code insufficient_quota, no Retry-After
    (waiting does not help)."""
    message = (
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors."
    )
    body = {
        "error": {
            "message": message,
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    return Step("error", status=429, body=body, times=times)


def azure_prompt_filtered(*, times: int | None = 1) -> Step:
    """Azure's 400 when its content filter flags the prompt (code content_filter)."""
    message = (
        "The response was filtered due to the prompt triggering Azure OpenAI's content "
        "management policy. Please modify your prompt and retry. To learn more about our "
        "content filtering policies please read our documentation: "
        "https://go.microsoft.com/fwlink/?linkid=2198766"
    )
    filtered = {"filtered": True, "severity": "medium"}
    safe = {"filtered": False, "severity": "safe"}
    inner = {
        "code": "ResponsibleAIPolicyViolation",
        "content_filter_result": {
            "hate": safe,
            "self_harm": safe,
            "sexual": safe,
            "violence": filtered,
        },
    }
    body = {
        "error": {
            "message": message,
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": inner,
        }
    }
    return Step("error", status=400, body=body, times=times)


def content_filtered(*, times: int | None = 1) -> Step:
    """Azure's answer when its filter flags the completion: HTTP 200, content null,
    finish_reason content_filter, and the filter's verdict beside it."""
    results = {"violence": {"filtered": True, "severity": "medium"}}
    return Step(
        "reply",
        content=None,
        finish_reason="content_filter",
        times=times,
        extra={"content_filter_results": results},
    )


def not_implemented(*, times: int | None = 1) -> Step:
    """501 Not Implemented: a server (or proxy) that does not serve this route."""
    body = {"error": {"message": "Not Implemented", "type": "server_error", "code": None}}
    return Step("error", status=501, body=body, times=times)


def error(
    status: int,
    message: str = "scripted error",
    *,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    param: str | None = None,
    code: str | None = None,
    times: int | None = 1,
) -> Step:
    """An HTTP error with an OpenAI-style body {"error": {message, type, param, code}}."""
    if body is None:
        body = {"error": {"message": message, "type": _error_type(status), "param": param}}
        body["error"]["code"] = code
    return Step("error", status=status, body=body, headers=dict(headers or {}), times=times)


def stall(
    seconds: float | None = None, content: str = "too late", *, times: int | None = 1
) -> Step:
    """Sleep `seconds` (default: the server's stall_s, longer than the fixture's timeout)."""
    return Step("stall", content=content, delay_s=-1.0 if seconds is None else seconds, times=times)


def drop(*, mid_stream: str = "", times: int | None = 1) -> Step:
    """Close the connection without a response; with mid_stream, after streaming that text."""
    return Step("drop", content=mid_stream, times=times)


def garbage(*, times: int | None = 1) -> Step:
    """HTTP 200 whose body is not JSON."""
    return Step("garbage", times=times)


# -- request-checking modes: what a server refuses before it generates ---------------------------
def prompt_tokens_of(body: Mapping[str, Any]) -> int:
    """The fake's own count of a request's prompt: characters / 4, plus 4 per message for the
    chat template. Not tiktoken's count, just as a real server's tokenizer is not."""
    messages = body.get("messages") or []
    return sum(len(_content_text(m.get("content"))) // 4 + 4 for m in messages)


@dataclass
class VLLM:
    """vLLM's OpenAI-compatible server started with `--max-model-len`: a request whose prompt
    plus max_tokens (or max_completion_tokens) exceed the window gets vLLM's 400, in the
    wording of vLLM >= 0.9 ("new") or of earlier versions ("old", with the top-level
    {"object": "error"} body)."""

    max_model_len: int
    wording: str = "new"

    def check(self, body: Mapping[str, Any]) -> Step | None:
        window, prompt = self.max_model_len, prompt_tokens_of(body)
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        if prompt >= window:
            message = (
                f"This model's maximum context length is {window} tokens. However, your request "
                f"has {prompt} input tokens. Please reduce the length of the input messages."
            )
        elif asked is not None and prompt + asked > window:
            if self.wording == "new":
                message = (
                    f"'max_tokens' or 'max_completion_tokens' is too large: {asked}. This model's "
                    f"maximum context length is {window} tokens and your request has {prompt} "
                    f"input tokens ({asked} > {window} - {prompt}). None"
                )
            else:
                message = (
                    f"This model's maximum context length is {window} tokens. However, you "
                    f"requested {prompt + asked} tokens ({prompt} in the messages, {asked} in the "
                    "completion). Please reduce the length of the messages or completion."
                )
        else:
            return None
        inner = {"message": message, "type": "BadRequestError", "param": None, "code": 400}
        body_out = {"error": inner} if self.wording == "new" else {"object": "error", **inner}
        return Step("error", status=400, body=body_out)


@dataclass
class ReasoningModel:
    """An o-series (reasoning) model behind a name the client does not recognise, an Azure
    deployment or a proxy alias: it refuses max_tokens and any temperature but 1, one 400 at a
    time, as OpenAI and Azure do."""

    def check(self, body: Mapping[str, Any]) -> Step | None:
        if "max_tokens" in body:
            return error(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                param="max_tokens",
                code="unsupported_parameter",
            )
        temperature = body.get("temperature")
        if temperature is not None and temperature != 1:
            return error(
                400,
                f"Unsupported value: 'temperature' does not support {temperature} with this "
                "model. Only the default (1) value is supported.",
                param="temperature",
                code="unsupported_value",
            )
        return None


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status in (401, 403):
        return "authentication_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


@dataclass
class RecordedRequest:
    """What one request carried, as the server saw it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]
    step: str  # the kind of step that answered it ("exhausted" when none was left)
    route: str | None  # the route substring that matched, None for the shared queue
    started: float
    finished: float = 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def response_format(self) -> dict[str, Any] | None:
        return self.body.get("response_format")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def system(self) -> str:
        return system_text(self.messages)

    @property
    def last_user(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return _content_text(users[-1].get("content")) if users else ""


def system_text(messages: list[dict[str, Any]]) -> str:
    """The text routing matches against: system/developer messages, else the first message."""
    parts = [
        _content_text(m.get("content"))
        for m in messages
        if m.get("role") in ("system", "developer")
    ]
    if not parts and messages:
        parts = [_content_text(messages[0].get("content"))]
    return "\n".join(parts)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts [{"type": "text", "text": ...}]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class FakeOpenAI:
    """The server: start() binds 127.0.0.1 on a free port; .url is the OpenAI base URL."""

    def __init__(self, *, stall_s: float = 1.5, stream_piece_chars: int = 7) -> None:
        self.stall_s = stall_s
        self.stream_piece_chars = stream_piece_chars
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self.models = [FAKE_MODEL, "fake-local-model"]
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: list[Step] = []
        self._routes: list[tuple[str, list[Step]]] = []
        self.providers: list[Any] = []  # VLLM, ReasoningModel: checked before the script
        # False: a server that ignores `stream: true` (some gateways, older servers) and answers
        # every reply as one application/json completion
        self.streams = True
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------------------
    def script(self, steps: Iterable[Step]) -> FakeOpenAI:
        """Replace the shared queue (requests that match no route)."""
        with self._lock:
            self._queue = list(steps)
        return self

    def route(self, system_substring: str, steps: Iterable[Step]) -> FakeOpenAI:
        """Requests whose system prompt contains the substring take these steps instead."""
        with self._lock:
            self._routes = [r for r in self._routes if r[0] != system_substring]
            self._routes.append((system_substring, list(steps)))
        return self

    def serve(self, *providers: Any) -> FakeOpenAI:
        """Check every request as these servers do (VLLM, ReasoningModel) before the script
        answers it; a refused request takes no scripted step (step "provider")."""
        with self._lock:
            self.providers = list(providers)
        return self

    @property
    def refused(self) -> list[RecordedRequest]:
        """The requests a provider mode refused."""
        return [r for r in self.requests if r.step == "provider"]

    def reset(self) -> None:
        """Forget the script, the routes, the providers and the recorded requests."""
        with self._lock:
            self._queue, self._routes, self.providers = [], [], []
            self.requests, self.unexpected = [], []
            self.in_flight = self.max_in_flight = 0

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def remaining(self) -> int:
        """Scripted steps not consumed yet (a step with times=None counts once)."""
        with self._lock:
            return len(self._queue) + sum(len(s) for _, s in self._routes)

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def root(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        """The base URL to give the openai client (OPENAI_BASE_URL)."""
        return self.root + "/v1"

    def start(self) -> FakeOpenAI:
        handler = type("_Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True  # a stalled handler must not block shutdown
        # A 50 ms poll keeps stop() quick (the default 0.5 s would add that to every test).
        serve = lambda: self._httpd.serve_forever(poll_interval=0.05)  # noqa: E731
        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- dispatch (called from handler threads) ----------------------------------------------
    def _take_step(self, messages: list[dict[str, Any]]) -> tuple[Step | None, str | None]:
        system = system_text(messages)
        with self._lock:
            for substring, steps in self._routes:
                if substring in system:
                    return _pop(steps), substring
            return _pop(self._queue), None

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _pop(steps: list[Step]) -> Step | None:
    if not steps:
        return None
    step = steps[0]
    if step.times is None:
        return step
    if step.times <= 1:
        steps.pop(0)
    else:
        steps[0] = Step(**{**step.__dict__, "times": step.times - 1})
    return step


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self._record({}, "models" if parts.path.endswith("/models") else "not-found", None)
        if parts.path.endswith("/models"):
            data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.fake.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": f"no route {parts.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw or b"{}")
        if not urlsplit(self.path).path.endswith("/chat/completions"):
            self._record(body, "not-found", None)
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        refusal = next((r for p in self.fake.providers if (r := p.check(body))), None)
        if refusal is not None:
            step, route, label = refusal, None, "provider"
        else:
            step, route = self.fake._take_step(body.get("messages", []))
            label = step.kind if step else "exhausted"
        record = self._record(body, label, route)
        self.fake._enter()
        self._counted = True
        try:
            self._answer(step, body, record)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a stall past its timeout)
        finally:
            record.finished = time.monotonic()
            self._replying()

    def _replying(self) -> None:
        """The request stops counting as in flight once its reply is about to be written: past
        that, the client may read the whole reply and send its next request before this thread
        runs again (under load a limit of 2 was seen as 3)."""
        if self._counted:
            self._counted = False
            self.fake._leave()

    def _record(self, body: dict[str, Any], step: str, route: str | None) -> RecordedRequest:
        parts = urlsplit(self.path)
        record = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            step=step,
            route=route,
            started=time.monotonic(),
        )
        with self.fake._lock:
            self.fake.requests.append(record)
            if step == "exhausted":
                self.fake.unexpected.append(record)
        return record

    def _answer(self, step: Step | None, body: dict[str, Any], record: RecordedRequest) -> None:
        if step is None:
            msg = (
                f"fake_openai: script exhausted (route={record.route!r}, system={record.system!r})"
            )
            self._send_json(400, {"error": {"message": msg[:300], "type": "script_exhausted"}})
        elif step.kind == "error":
            self._send_json(step.status, step.body, step.headers)
        elif step.kind == "drop":
            if step.content and body.get("stream"):
                self._send_stream(step, body.get("model") or FAKE_MODEL, None, finish=False)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif step.kind == "garbage":
            self._send_bytes(200, b"<html>upstream proxy error</html>", "application/json")
        else:
            delay = step.delay_s
            if step.kind == "stall" and delay < 0:
                delay = self.fake.stall_s
            time.sleep(delay)
            self._send_completion(_cut_to_max_tokens(step, body), body)

    def _send_completion(self, step: Step, body: dict[str, Any]) -> None:
        model = body.get("model") or FAKE_MODEL
        usage = _usage(step, body)
        if body.get("stream") and self.fake.streams:
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            self._send_stream(step, model, usage if include else None)
            return
        time.sleep(step.generation_s)  # not streamed: nothing arrives until it is all written
        self._replying()
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.reasoning:
            message[step.reasoning_field] = step.reasoning
        payload = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": step.finish_reason,
                    **step.extra,
                }
            ],
        }
        if usage is not None:
            payload["usage"] = usage
        self._send_json(200, payload)

    def _send_stream(
        self, step: Step, model: str, usage: dict[str, int] | None, *, finish: bool = True
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")  # no length: the stream ends when we close
        self.end_headers()
        self.close_connection = True
        chunks = list(_stream_chunks(step, model, usage, self.fake.stream_piece_chars))
        if not finish:  # a cut stream: content deltas only, no finish chunk, no [DONE]
            chunks = chunks[:-1]
        pause = step.generation_s / max(len(chunks), 1)
        for chunk in chunks:
            time.sleep(pause)
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        if finish:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    def _send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self._send_bytes(status, data.encode(), "application/json", headers)

    def _send_bytes(
        self, status: int, data: bytes, ctype: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def _cut_to_max_tokens(step: Step, body: dict[str, Any]) -> Step:
    """The reply as a server sends it under the request's max_tokens (characters / 4 a token):
    reasoning first, then content, cut with finish_reason "length" where the budget ends."""
    budget = body.get("max_completion_tokens") or body.get("max_tokens")
    if step.kind != "reply" or not budget or step.content is None:
        return step
    room = budget * 4
    reasoning = step.reasoning[:room]
    room -= len(reasoning)
    if len(step.reasoning) <= len(reasoning) and len(step.content) <= room:
        return step
    return Step(**{**step.__dict__, "reasoning": reasoning, "content": step.content[:room],
                   "finish_reason": "length"})  # fmt: skip


def _usage(step: Step, body: dict[str, Any]) -> dict[str, int] | None:
    if step.usage is False:
        return None
    if isinstance(step.usage, tuple):
        prompt, completion = step.usage
    else:  # a rough chars/4 estimate, deterministic so tests can rely on it being > 0
        prompt = prompt_tokens_of(body)
        completion = (len(step.content or "") + len(step.reasoning)) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _stream_chunks(
    step: Step, model: str, usage: dict[str, int] | None, piece: int
) -> Iterator[dict[str, Any]]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    for i in range(0, len(step.reasoning), piece):
        delta = {step.reasoning_field: step.reasoning[i : i + piece]}
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    content = step.content or ""
    for i in range(0, len(content), piece):
        delta = {"content": content[i : i + piece]}
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    last = {"index": 0, "delta": {}, "finish_reason": step.finish_reason, **step.extra}
    yield {**base, "choices": [last]}
    if usage is not None:  # stream_options.include_usage: a last chunk with no choices
        yield {**base, "choices": [], "usage": usage}


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI; OPENAI_BASE_URL/OPENAI_API_KEY/KERNELWRIGHT_* point at it.

    Also: KERNELWRIGHT_MODEL=gpt-4o-mini, the response cache under tmp_path, a 1 s client
    timeout (stall() sleeps 1.5 s) and 10 ms retry backoff so failure paths stay fast.
    """
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    server = FakeOpenAI().start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    monkeypatch.setenv("KERNELWRIGHT_MODEL", FAKE_MODEL)
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "kernelwright-cache"))
    monkeypatch.setenv("KERNELWRIGHT_TIMEOUT_S", "1.0")
    monkeypatch.setenv("KERNELWRIGHT_RETRY_BASE_S", "0.01")
    no_proxy = "127.0.0.1,localhost"
    monkeypatch.setenv("NO_PROXY", no_proxy)
    monkeypatch.setenv("no_proxy", no_proxy)
    try:
        yield server
    finally:
        server.stop()
