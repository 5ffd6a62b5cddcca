"""When a failed request is tried again, and after how long (ChatClient's retry loop)."""

from __future__ import annotations

import random
import time

from .config import LLMConfig
from .errors import Failure

# A timed-out generation may still be running (and billed) on the server: retry it once, and
# streamed, so that a slow model that is producing tokens is not cut off again.
MAX_TIMEOUT_RETRIES = 1


def retry_plan(
    config: LLMConfig,
    failure: Failure,
    failures: int,
    timeouts: int,
    started: float,
    rng: random.Random,
) -> tuple[str | None, float]:
    """(why not to retry, or None; how long to wait before the retry)."""
    if not failure.retryable:
        return "", 0.0
    if failure.kind == "timeout" and timeouts > MAX_TIMEOUT_RETRIES:
        return (
            f"a timed-out generation is retried {MAX_TIMEOUT_RETRIES} time(s) at most, since "
            "the server may still be generating (and billing) each one"
        ), 0.0
    if failures > config.max_retries:
        n = config.max_retries
        return f"{n} {'retry' if n == 1 else 'retries'} spent", 0.0
    if failure.wait_s is not None and failure.wait_s > config.retry_max_s:
        return (
            f"the server asked to wait {failure.wait_s:.0f} s (Retry-After), longer than the "
            f"{config.retry_max_s:.0f} s kernelwright waits"
        ), 0.0
    wait = wait_s(config, failure, failures, rng)
    if time.monotonic() + wait - started > config.call_budget_s:
        return f"the call's retry budget of {config.call_budget_s:g} s is spent", 0.0
    return None, wait


def wait_s(config: LLMConfig, failure: Failure, failures: int, rng: random.Random) -> float:
    """Retry-After when the server gave one, else exponential backoff with jitter."""
    if failure.wait_s is not None:
        return min(failure.wait_s, config.retry_max_s)
    backoff = config.retry_base_s * 2 ** (failures - 1)
    return min(backoff, config.retry_max_s) * rng.uniform(0.5, 1.0)
