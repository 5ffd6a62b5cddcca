"""report/format.py: the numbers, tables and JSON every report is made of."""

from __future__ import annotations

import json
import math

import pytest

from kernelwright.report import format as fmt
from kernelwright.report.plots import plot_rounds, plot_suite


@pytest.mark.parametrize(
    ("fn", "value", "text"),
    [
        (fmt.x_text, 1.234, "1.23x"),
        (fmt.x_text, None, "–"),
        (fmt.x_text, math.nan, "–"),  # a NaN speedup is no speedup, not "nanx"
        (fmt.x_text, math.inf, "–"),
        (fmt.pct_text, 0.456, "46%"),
        (fmt.num_text, 12345, "12,345"),
        (fmt.num_text, 12345.0, "12,345"),
        (fmt.num_text, 2.5, "2.50"),
        (fmt.usd_text, 0.00123, "$0.0012"),
        (fmt.ms_text, 0.0123456, "0.01235 ms"),
        (fmt.ms_text, "not a number", "–"),
    ],
)
def test_numbers_read_as_numbers_or_a_dash(fn, value, text):
    assert fn(value) == text


def test_json_has_no_nan_and_reads_back(tmp_path):
    path = fmt.write_json(tmp_path / "r.json", {"a": math.nan, "b": [1.0, math.inf], "p": tmp_path})
    assert json.loads(path.read_text()) == {"a": None, "b": [1.0, None], "p": str(tmp_path)}
    (tmp_path / "cut.json").write_text('{"half": ')  # a run killed mid-write
    assert fmt.read_json(tmp_path / "cut.json") is None
    assert fmt.read_json(tmp_path / "missing.json") is None


def test_markdown_cells_cannot_break_the_table():
    table = fmt.md_table(["task", "note"], [["a|b", "line one\nline two"]])
    head, rule, row = table.splitlines()
    assert row == "| a\\|b | line one line two |"
    assert head.count("|") == rule.count("|") == row.count("|") - 1  # the escaped one


def test_usage_text_names_failures_and_calls_not_sent():
    usage = {
        "calls": 3,
        "cached_calls": 1,
        "failed_calls": 2,
        "failures": {"timeout": 1, "rate-limit": 1},
        "refused_calls": 4,
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "cost_usd": 0.01,
    }
    text = fmt.usage_text(usage)
    assert text == (
        "3 calls answered (1 cached), 2 failed (1 rate-limit, 1 timeout), 4 not sent, "
        "1,200 prompt + 300 completion tokens, $0.0100"
    )
    assert fmt.usage_text({}) == "no LLM calls recorded"
    noted = fmt.usage_text({**usage, "notes": ["no price known for model 'x': cost counted as 0"]})
    assert noted.endswith("$0.0100; no price known for model 'x': cost counted as 0")


def test_peaks_and_notes():
    assert fmt.peaks(None, None) == "–"
    assert fmt.peaks(2**30, None) == "1.00 / ? GiB"
    assert fmt.short_note("first\nsecond") == "first"
    assert fmt.short_note("x" * 200) == "x" * 117 + "..."


def test_series_are_one_per_task_variant_and_gpu():
    h = {"task_name": "gelu", "task_hash": "abc", "variant": "bf16", "env_key": "H200|torch"}
    assert fmt.series_name(h) == "gelu (bf16)"
    assert fmt.series_name({**h, "variant": None}) == "gelu"
    assert fmt.series_key(h) == ("abc", "bf16", "H200")


def test_plots_are_written_with_and_without_data(tmp_path):
    rows = [{"task": "a", "correct": True, "speedup_eager": 1.5, "speedup_compiled": None}]
    for path in (
        plot_suite(rows, tmp_path / "suite.png"),
        plot_suite([], tmp_path / "empty.png"),
        plot_rounds([], tmp_path / "rounds.png"),
    ):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
