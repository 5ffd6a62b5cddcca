"""agents/llm/replies.py: JSON found in replies and validated."""

from __future__ import annotations

import pytest
from test_llm_support import VALID, Verdict

from kernelwright.agents.llm.replies import parse_structured


def test_parse_structured_finds_json_in_prose():
    text = f"Here is my verdict:\n{VALID}\nHope that helps."
    assert parse_structured(text, Verdict).action == "continue"
    with pytest.raises(ValueError, match="no JSON object"):
        parse_structured("   ", Verdict)
