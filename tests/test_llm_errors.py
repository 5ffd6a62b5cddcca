"""agents/llm/errors.py: LLMError, and the classification of failed attempts."""

from __future__ import annotations

import pickle

import pytest

from kernelwright.agents.llm import LLMError
from kernelwright.agents.llm.errors import retry_after_s


def test_retry_after_ms_wins_and_http_dates_parse():
    assert retry_after_s({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    assert retry_after_s({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after_s({"x-other": "1"}) is None


def test_llm_error_pickles_and_rejects_unknown_kinds():
    err = pickle.loads(pickle.dumps(LLMError("timeout", "slow", status=408, attempts=3)))
    assert (err.kind, err.message, err.status, err.attempts) == ("timeout", "slow", 408, 3)
    with pytest.raises(ValueError, match="unknown LLMError kind"):
        LLMError("oops", "x")
