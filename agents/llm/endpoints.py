"""What an endpoint taught the run (EndpointFacts), and its circuit breaker (EndpointState)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

import pydantic

from .cache import ResponseCache
from .config import LLMConfig, endpoint_url
from .errors import LLMError

FormatMode = Literal["json_schema", "json_object", "none"]
_FORMAT_ORDER = ("json_schema", "json_object", "none")  # strongest first


def weaker_format(a: str, b: str | None) -> str:
    return a if b is None else max(a, b, key=_FORMAT_ORDER.index)


class EndpointFacts(pydantic.BaseModel):
    """What an endpoint said about one model, in its errors. The run follows it from then on and
    the reply cache keeps it for the next run, so a reasoning model behind an alias costs its two
    400s once, not at every agent step of every round."""

    max_tokens_key: Literal["max_tokens", "max_completion_tokens"] | None = None
    dropped: list[str] = []  # optional parameters it rejected
    response_format: FormatMode | None = None  # the strongest format it accepts
    context_window: int | None = None  # as the server stated it
    max_output_tokens: int | None = None  # the most completion tokens it allows
    token_ratio: float | None = None  # its count of a prompt over tiktoken's

    def describe(self) -> str:
        parts = []
        if self.max_tokens_key:
            parts.append(f"send {self.max_tokens_key}")
        if self.dropped:
            parts.append("no " + ", ".join(sorted(self.dropped)))
        if self.response_format:
            parts.append(f"response_format {self.response_format}")
        if self.context_window:
            parts.append(f"a {self.context_window}-token context window")
        if self.max_output_tokens:
            parts.append(f"at most {self.max_output_tokens} output tokens")
        if self.token_ratio:
            parts.append(f"its tokenizer counts {self.token_ratio:.2f}x tiktoken")
        return "; ".join(parts)


class EndpointState:
    """One endpoint and model within a run: what it taught (EndpointFacts) and its circuit
    breaker. Shared by every client of the run, from every thread."""

    def __init__(
        self,
        endpoint: str,
        model: str,
        facts: EndpointFacts,
        *,
        threshold: int,
        save: Callable[[EndpointFacts], None] | None = None,
    ) -> None:
        self.endpoint, self.model = endpoint, model
        self.threshold = max(1, threshold)
        self._facts = facts
        self._save = save
        self._lock = threading.Lock()
        self._failures_in_a_row = 0
        self._open: LLMError | None = None

    # -- facts -------------------------------------------------------------------------------
    def facts(self) -> EndpointFacts:
        with self._lock:
            return self._facts.model_copy(deep=True)

    def learn(self, **changes: Any) -> bool:
        """Set facts (None values are ignored); True when something changed."""
        return self._update(lambda f: f.model_copy(update=_not_none(changes)))

    def drop(self, param: str) -> bool:
        return self._update(lambda f: f.model_copy(update={"dropped": sorted({*f.dropped, param})}))

    def weaken_format(self, mode: str) -> bool:
        """Never strengthens: another thread may have learned a weaker one already."""
        return self._update(
            lambda f: f.model_copy(
                update={"response_format": weaker_format(mode, f.response_format)}
            )
        )

    def _update(self, change: Callable[[EndpointFacts], EndpointFacts]) -> bool:
        with self._lock:
            updated = change(self._facts)
            if updated == self._facts:
                return False
            self._facts = updated
        if self._save is not None:
            self._save(updated)
        return True

    # -- the breaker -------------------------------------------------------------------------
    @property
    def open_error(self) -> LLMError | None:
        """The failure that opened the breaker; None while the endpoint is still called."""
        with self._lock:
            return self._open

    def succeeded(self) -> None:
        with self._lock:
            self._failures_in_a_row = 0

    def failed(self, error: LLMError) -> bool:
        """Count a call that failed for good; True when this one opened the breaker."""
        with self._lock:
            if self._open is not None:
                return False
            self._failures_in_a_row += 1
            if self._failures_in_a_row < self.threshold:
                return False
            self._open = error
            return True

    def breaker_text(self) -> str:
        error = self.open_error
        if error is None:
            return ""
        return (
            f"the endpoint {self.endpoint} (model {self.model}) failed {self.threshold} calls in a "
            f"row, the last with {error}; it is not called again in this run"
        )


def _not_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class Endpoints:
    """The EndpointStates of one run, by (endpoint, model); facts start from the reply cache
    (unless `read_stored` is False: --no-cache, after a server was reconfigured, say) and what
    the run learns is written back."""

    def __init__(self, cache: ResponseCache | None = None, *, read_stored: bool = True) -> None:
        self.cache = cache
        self.read_stored = read_stored
        self._states: dict[tuple[str, str], EndpointState] = {}
        self._lock = threading.Lock()

    def state(self, config: LLMConfig) -> tuple[EndpointState, bool]:
        """The state of the config's endpoint and model, and whether it was just created from
        facts an earlier run stored."""
        key = (endpoint_url(config), config.model)
        with self._lock:
            found = self._states.get(key)
            if found is not None:
                return found, False
            facts = self._stored(*key)
            state = EndpointState(
                *key, facts, threshold=config.breaker_failures, save=self._saver(*key)
            )
            self._states[key] = state
            return state, facts != EndpointFacts()

    def states(self) -> list[EndpointState]:
        with self._lock:
            return list(self._states.values())

    def _stored(self, endpoint: str, model: str) -> EndpointFacts:
        if self.cache is None or not self.read_stored:
            return EndpointFacts()
        try:
            return EndpointFacts.model_validate(self.cache.get_facts(endpoint, model) or {})
        except pydantic.ValidationError:  # written by another version: learn it again
            return EndpointFacts()

    def _saver(self, endpoint: str, model: str) -> Callable[[EndpointFacts], None] | None:
        cache = self.cache
        if cache is None:
            return None
        return lambda facts: cache.put_facts(endpoint, model, facts.model_dump())
