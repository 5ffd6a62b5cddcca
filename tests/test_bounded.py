"""sandbox/static/bounded.py: the static checks with source size, time and memory bounded."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kernelwright.sandbox import EvalConfig, EvalPool
from kernelwright.sandbox.static import bounded
from kernelwright.sandbox.static.bounded import MAX_SOURCE_BYTES, bounded_static_check
from kernelwright.sandbox.static.check import static_check
from kernelwright.sandbox.static.pyparse import parse

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "prompts" / "examples").glob("*.py"))
ZOO = sorted((ROOT / "tests" / "adversarial").glob("*.py"))
GOOD = (ROOT / "prompts" / "examples" / "gelu.py").read_text()

# ~250 KB that the checks need seconds for (2.7 s measured for 296 KB on a loaded 2-core VM).
SLOW = "\n".join(f"y{i} = torch.relu(x{i}).sum(dim=1) * 3 + f(a, b, c)[i]" for i in range(3800))
# A 240 KB list literal: ~170 MB of syntax tree.
LARGE_TREE = "x = [" + ",".join(["1"] * 120_000) + "]\n"


@pytest.mark.parametrize("path", EXAMPLES[:3] + ZOO[:6], ids=lambda p: p.stem)
def test_same_verdict_as_the_checks_in_process(path):
    source = path.read_text()
    assert bounded_static_check(source) == static_check(source)


def test_a_source_over_the_size_limit_is_refused_before_it_is_parsed(monkeypatch):
    def never(*args):
        raise AssertionError("parsed")

    monkeypatch.setattr(bounded, "static_check", never)
    source = GOOD + "#" * MAX_SOURCE_BYTES
    (v,) = bounded_static_check(source)
    assert v.rule == "source-size" and "at most 768 KiB" in v.message
    # Bytes, not characters: 300k three-byte characters are 900 KB.
    assert bounded_static_check("# " + "\u20ac" * 300_000)[0].rule == "source-size"


def test_a_source_just_under_the_limit_is_checked():
    padded = GOOD + "#" * (MAX_SOURCE_BYTES - len(GOOD.encode()) - 1) + "\n"
    assert len(padded.encode()) == MAX_SOURCE_BYTES
    assert bounded_static_check(padded) == []


def test_a_check_past_its_deadline_is_a_violation_and_the_child_is_gone(monkeypatch):
    monkeypatch.setattr(bounded, "STATIC_CHECK_TIMEOUT_S", 0.3)
    children = _children()
    started = time.monotonic()
    (v,) = bounded_static_check(SLOW)
    assert time.monotonic() - started < 5.0
    assert v.rule == "static-check-limit" and "ran past 0.3 s" in v.message
    assert _children() <= children  # killed and reaped


def test_a_check_past_its_memory_is_a_violation(monkeypatch):
    monkeypatch.setattr(bounded, "STATIC_CHECK_MEMORY_BYTES", 32 << 20)
    (v,) = bounded_static_check(LARGE_TREE)
    assert v.rule == "static-check-limit" and "more than 32 MiB" in v.message
    # The parser's own nesting limit raises the same MemoryError without using memory: syntax.
    (deep,) = bounded_static_check("-" * 100_000 + "1\n")
    assert deep.rule == "syntax" and "nested too deeply" in deep.message


def test_the_default_limits_leave_room_for_the_largest_sources():
    assert bounded_static_check(LARGE_TREE)[0].rule == "model-new"  # checked to the end


def test_a_failure_of_the_checker_itself_is_an_error_not_a_verdict(monkeypatch):
    def broken(source, filename):
        raise KeyError("a bug in the checker")

    monkeypatch.setattr(bounded, "static_check", broken)
    with pytest.raises(RuntimeError, match="KeyError: 'a bug in the checker'"):
        bounded_static_check(GOOD)


def test_many_violations_come_back_capped():
    source = "import os\n" * 5000 + "x = '" + "a" * 10_000 + "'\n"
    found = bounded_static_check(source)
    assert len(found) == bounded.MAX_VIOLATIONS
    assert all(len(v.message) <= bounded.MAX_VIOLATION_CHARS for v in found)


def test_checks_from_threads_while_others_parse_never_deadlock():
    """The pool checks from its threads while other threads parse (the lock forks held)."""
    stop = threading.Event()

    def parse_forever():
        while not stop.is_set():
            parse(GOOD)

    parsers = [threading.Thread(target=parse_forever) for _ in range(2)]
    results: list = []
    checkers = [
        threading.Thread(
            target=lambda: results.extend(bounded_static_check(GOOD) for _ in range(5))
        )
        for _ in range(3)
    ]
    for t in parsers + checkers:
        t.start()
    for t in checkers:
        t.join(timeout=60)
    stop.set()
    for t in parsers:
        t.join()
    assert results == [[]] * 15


def test_the_pool_refuses_an_oversized_candidate_without_starting_a_worker():
    huge = GOOD + "\n" + "# " + "x" * (800 * 1024) + "\n"
    with EvalPool(workers=1, devices=["cpu"]) as pool:
        result = pool.submit(ROOT / "tests" / "tasks" / "gelu.py", huge, EvalConfig()).result()
        assert pool.stats["started"] == 0
    assert (result.status, result.rule) == ("rejected", "source-size")
    assert "768 KiB" in result.message


def _children() -> set[int]:
    """Live child processes of this one (zombies included)."""
    me = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                found.add(int(entry))
    return found
