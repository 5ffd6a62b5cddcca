"""Usage and cost: counts of calls (AgentUsage), per agent for a run (UsageLedger), prices."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pydantic

# USD per 1M (input, output) tokens, OpenAI list prices (mid-2025). Override per model with
# LLMConfig(prices=...) or KERNELWRIGHT_PRICES='{"model": [in, out]}'. Same prefix lookup.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}


class AgentUsage(pydantic.BaseModel):
    """Usage of one agent's calls (or one call's, or a run's total: they sum). `calls` counts
    answered calls (a cached reply adds a call and a cached_call, no tokens and no cost); a call
    that failed for good adds a failed_call and its kind to `failures`; one the circuit breaker
    kept from being sent adds a refused_call. `unusable`: answered, but the reply could not be
    used (invalid JSON after the repair, cut off after its continuations). `retries`: HTTP
    attempts past the first of each request. A pydantic model: the run's state (agents/state.py's
    Usage) holds one per agent and is checkpointed."""

    model_config = pydantic.ConfigDict(frozen=True)

    calls: int = 0  # answered, cached ones included
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    failed_calls: int = 0  # failed for good, past their retries
    refused_calls: int = 0  # not sent: the circuit breaker had switched the endpoint off
    unusable: int = 0  # answered, but unusable (invalid JSON after the repair, cut off)
    retries: int = 0
    failures: dict[str, int] = pydantic.Field(default_factory=dict)  # kind -> failed calls
    last_error: str = ""

    def __add__(self, other: AgentUsage) -> AgentUsage:
        failures = dict(self.failures)
        for kind, n in other.failures.items():
            failures[kind] = failures.get(kind, 0) + n
        return AgentUsage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            failed_calls=self.failed_calls + other.failed_calls,
            refused_calls=self.refused_calls + other.refused_calls,
            unusable=self.unusable + other.unusable,
            retries=self.retries + other.retries,
            failures=failures,
            last_error=other.last_error or self.last_error,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "failed_calls": self.failed_calls,
            "refused_calls": self.refused_calls,
            "unusable": self.unusable,
            "retries": self.retries,
            "failures": dict(sorted(self.failures.items())),
            "last_error": self.last_error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentUsage:
        """From to_dict(); fields an older run.json lacks keep their defaults."""
        fields = cls.model_fields.items()
        defaults = {name: f.default for name, f in fields if name != "failures"}
        values = {name: data.get(name, default) for name, default in defaults.items()}
        return cls(**values, failures=dict(data.get("failures") or {}))

    @classmethod
    def failed(
        cls, kind: str, message: str, attempts: int, billed: AgentUsage | None = None
    ) -> AgentUsage:
        """One call that failed for good after `attempts` HTTP requests."""
        failure = cls(
            failed_calls=1,
            retries=max(attempts - 1, 0),
            failures={kind: 1},
            last_error=f"{kind}: {message}"[:500],
        )
        if billed is None:
            return failure
        tokens = cls(
            prompt_tokens=billed.prompt_tokens,
            completion_tokens=billed.completion_tokens,
            cost_usd=billed.cost_usd,
        )
        return failure + tokens


class UsageLedger:
    """Usage per agent for a run, shared by all clients and threads of that run."""

    def __init__(self, per_agent: Mapping[str, AgentUsage] | None = None) -> None:
        self._lock = threading.Lock()
        self._per_agent: dict[str, AgentUsage] = dict(per_agent or {})
        self.notes: list[str] = []

    def record(self, agent: str, usage: AgentUsage) -> None:
        with self._lock:
            self._per_agent[agent] = self._per_agent.get(agent, AgentUsage()) + usage

    def note(self, text: str) -> None:
        """A remark for the report (e.g. "no price for model X: cost counted as 0"), once."""
        with self._lock:
            if text not in self.notes:
                self.notes.append(text)

    def by_agent(self) -> dict[str, AgentUsage]:
        with self._lock:
            return dict(self._per_agent)

    def total(self) -> AgentUsage:
        return sum(self.by_agent().values(), AgentUsage())

    def to_dict(self) -> dict[str, Any]:
        """run.json's "usage": totals, per_agent {name: {...}}, and notes."""
        per_agent = self.by_agent()
        out = sum(per_agent.values(), AgentUsage()).to_dict()
        out["per_agent"] = {name: u.to_dict() for name, u in sorted(per_agent.items())}
        out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UsageLedger:
        """Rebuild from to_dict() (a resumed run keeps counting where it stopped)."""
        per_agent = {k: AgentUsage.from_dict(v) for k, v in (data.get("per_agent") or {}).items()}
        ledger = cls(per_agent)
        ledger.notes = list(data.get("notes") or [])
        return ledger
