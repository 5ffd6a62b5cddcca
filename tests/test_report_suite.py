"""Suite reports: KernelBench's metrics per task and per level, and the suite's files."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_report_support import (
    CPU,
    KERNEL,
    SUITE,
    blue_pixels,
    failed,
    ok_result,
)

from kernelwright.report.suite import suite_row, suite_summary, write_suite_report


def test_suite_metrics_by_hand():
    s = suite_summary(SUITE)
    assert (s["tasks"], s["correct"], s["correctness_rate"], s["timed"]) == (5, 4, 0.8, 3)
    # fast_p counts correct tasks strictly faster than p, over all 5 tasks; d is fast but wrong.
    assert s["fast_p"]["eager"] == {"0": 0.8, "1": 0.4, "1.5": 0.2, "2": 0.0}
    assert s["fast_p"]["compiled"] == {"0": 0.8, "1": 0.2, "1.5": 0.0, "2": 0.0}
    assert s["geomean_speedup_eager"] == pytest.approx((2.0 * 1.5 * 0.5) ** (1 / 3))  # 1.1447
    assert s["geomean_speedup_compiled"] == pytest.approx((1.2 * 0.5 * 0.25) ** (1 / 3))  # 0.5313


def test_suite_metrics_edge_cases():
    empty = suite_summary([])
    assert empty["tasks"] == 0 and empty["correctness_rate"] is None
    assert empty["fast_p"]["eager"]["1"] is None and empty["geomean_speedup_eager"] is None
    all_wrong = suite_summary([{"task": "x", "correct": False, "speedup_eager": 5.0}])
    assert all_wrong["fast_p"]["eager"] == {"0": 0.0, "1": 0.0, "1.5": 0.0, "2": 0.0}
    assert all_wrong["geomean_speedup_eager"] is None


def test_suite_row_from_results():
    assert suite_row("a", ok_result(2.0, 1.2, 0.6)) == {
        "task": "a",
        "status": "ok",
        "rule": None,
        "correct": True,
        "speedup_eager": 2.0,
        "speedup_compiled": 1.2,
        "roofline_fraction": 0.6,
        "limiter": "memory",
        "environment": "NVIDIA H100|torch 2.11.0|triton 3.6.0",
        "candidate_peak_bytes": None,
        "reference_peak_bytes": None,
    }
    assert suite_row("b", failed("incorrect", "nan"))["correct"] is False
    assert suite_row("c", None)["status"] == "pending"


def test_suite_report_files(tmp_path):
    rows = [*SUITE[:2], {**SUITE[2], "kernel": KERNEL}, *SUITE[3:]]
    paths = write_suite_report(rows, tmp_path / "suite")
    md = paths["markdown"].read_text()
    assert "| Correct | 4 (80%) |" in md
    assert "| fast_p vs eager | fast_0: 80%, fast_1: 40%, fast_1.5: 20%, fast_2: 0% |" in md
    assert "| fast_p vs torch.compile | fast_0: 80%, fast_1: 20%, fast_1.5: 0%, fast_2: 0% |" in md
    assert "| Geomean speedup vs eager | 1.14x |" in md
    assert "| d | incorrect | no | 3.00x | 3.00x | – |" in md
    data = json.loads(paths["json"].read_text())
    assert data["summary"] == json.loads(json.dumps(suite_summary(SUITE)))
    assert [t["task"] for t in data["tasks"]] == ["a", "b", "c", "d", "e"]
    assert "kernel" not in data["tasks"][2]
    page = paths["html"].read_text()
    assert page.count("<details") == 1 and "<script" not in page
    assert blue_pixels(paths["plot"]) > 100


def test_suite_report_by_level_with_bound_tuned_and_notes(tmp_path):
    rows = [
        {"task": "level1/01_relu", "correct": True, "speedup_eager": 2.0,
         "speedup_compiled": 1.0, "roofline_fraction": 0.9, "limiter": "memory", "tuned": True},
        {"task": "level1/02_gemm", "correct": True, "speedup_eager": 0.5,
         "speedup_compiled": 0.25, "roofline_fraction": 0.1, "limiter": "compute", "tuned": False},
        {"task": "level2/01_sort", "status": "no-candidate", "correct": False,
         "note": "no offline candidate: nothing to fuse: forward is only sort\nmore"},
        {"task": "level2/02_conv", "correct": True, "speedup_eager": 4.0,
         "speedup_compiled": 2.0, "limiter": "compute", "tuned": False},
    ]  # fmt: skip
    s = suite_summary(rows)
    assert s["levels"]["level1"] == {
        "tasks": 2,
        "correct": 2,
        "geomean_speedup_eager": pytest.approx(1.0),
        "geomean_speedup_compiled": pytest.approx(0.5),
        "geomean_speedup_fastest": pytest.approx(0.5),  # 1.0 and 0.25 against the faster
        "shipped": 0,  # a tie with the baseline is not shipped
        "geomean_shipped": pytest.approx(1.0),
    }
    assert s["levels"]["level2"]["tasks"] == 2 and s["levels"]["level2"]["correct"] == 1
    assert suite_summary(SUITE)["levels"] == {}  # plain task names: no levels
    md = write_suite_report(rows, tmp_path)["markdown"].read_text()
    assert "| By level: level1 | 2 tasks, 2 correct, geomean 1.00x vs eager, 0.50x vs " in md
    assert "| level1/01_relu | ok | yes | 2.00x | 1.00x | 90% | memory | yes | – | 0 |  |" in md
    assert "| level1/02_gemm | ok | yes | 0.50x | 0.25x | 10% | compute | no | – | 0 |  |" in md
    # A no-candidate row says why, on one line.
    assert (
        "| level2/01_sort | no-candidate | no | – | – | – | – | – | – | 0 | no offline candidate: "
        "nothing to fuse: forward is only sort |"
    ) in md


def test_suite_report_counts_evaluator_and_task_errors_apart(tmp_path):
    rows = [
        {"task": "a", "status": "incorrect", "correct": False, "evaluator_errors": 2},
        {"task": "b", "status": "task-error", "correct": False, "note": "the reference fails"},
        {"task": "c", "correct": True, "speedup_eager": 2.0, "speedup_compiled": 1.0},
    ]
    s = suite_summary(rows)
    assert (s["evaluator_errors"], s["tasks_with_evaluator_errors"], s["task_errors"]) == (2, 1, 1)
    md = write_suite_report(rows, tmp_path)["markdown"].read_text()
    assert "| Evaluator errors (kernelwright's, not the candidates') | 2 in 1 task(s) |" in md
    assert "| Task errors (the reference itself fails) | 1 |" in md
    assert "| a | incorrect | no | – | – | – | – | – | – | 2 |" in md
    assert "| b | task-error | no |" in md


def test_the_suite_table_shows_both_peaks(tmp_path):
    from kernelwright.sandbox.results import Memory

    measured = dataclasses.replace(
        ok_result(2.0, 1.2, 0.6),
        memory=Memory(
            footprint_bytes=2**30, reference_peak_bytes=2**31, candidate_peak_bytes=3 * 2**30
        ),
    )
    rows = [suite_row("a", measured), suite_row("b", ok_result(1.5, 1.1, 0.5))]
    assert (rows[0]["candidate_peak_bytes"], rows[0]["reference_peak_bytes"]) == (3 * 2**30, 2**31)
    text = write_suite_report(rows, tmp_path)["markdown"].read_text()
    assert "Peak memory (candidate / reference)" in text and "3.00 / 2.00 GiB" in text


def test_a_mixed_cluster_suite_says_which_gpus_ran_what_and_sums_each_apart(tmp_path):
    """Rows from two GPU models (a mixed Ray cluster): the summary has one line per model, whose
    geometric means are its own tasks' only, and a GPUs table names the nodes and tasks."""
    h100, a100 = "NVIDIA H100|torch 2.11.0|triton 3.6.0", "NVIDIA A100|torch 2.11.0|triton 3.6.0"
    rows = [
        {"task": "a", "correct": True, "speedup_eager": 2.0, "environment": h100,
         "ran_on": ["node1 GPU 0"]},
        {"task": "b", "correct": True, "speedup_eager": 8.0, "environment": h100,
         "ran_on": ["node1 GPU 1"]},
        {"task": "c", "correct": True, "speedup_eager": 1.5, "environment": a100,
         "ran_on": ["node2 GPU 0"]},
    ]  # fmt: skip
    summary = suite_summary(rows)
    assert summary["environments"][h100]["geomean_speedup_eager"] == pytest.approx(4.0)
    assert summary["environments"][a100]["geomean_speedup_eager"] == pytest.approx(1.5)
    md = write_suite_report(rows, tmp_path)["markdown"].read_text()
    a100, h100 = a100.replace("|", "\\|"), h100.replace("|", "\\|")  # as markdown cells
    assert f"| {a100} | node2 GPU 0 | c |" in md
    assert f"| {h100} | node1 GPU 0, node1 GPU 1 | a, b |" in md
    assert f"| On {a100} | 1 task, 1 correct, geomean 1.50x vs eager" in md
    one = write_suite_report(rows[:1], tmp_path / "one")["markdown"].read_text()
    assert "| On " not in one and "| this machine |" not in one  # one model: no split


def test_a_cpu_suite_says_times_are_not_meaningful_once_and_draws_no_empty_chart(tmp_path):
    # issue 25: suite.html showed "fast_0: 100%" with no banner, an empty chart on top, and the
    # same truncated interpreter note in every row of the Note column.
    note = "Triton interpreter: correctness only; times are not meaningful " + "x" * 150
    rows = [
        {**suite_row(name, ok_result(1.0, 1.0, 0.0, env=CPU)), "note": note}
        for name in ("a", "b", "c")
    ]
    rows.append({**suite_row("d", failed("incorrect", "mismatch", env=CPU)), "note": "d differs"})
    paths = write_suite_report(rows, tmp_path / "suite")
    page, md = paths["html"].read_text(), paths["markdown"].read_text()
    for text in (page, md):
        assert "Times are not meaningful: these tasks ran under the Triton interpreter" in text
        assert text.count(note) == 1 and "3 of 4 tasks: " + note in text  # once, whole
        assert "d differs" in text
    assert "<img" not in page and "suite_speedups.png" not in md and "plot" not in paths
    timed = write_suite_report(SUITE, tmp_path / "gpu")
    assert "not meaningful" not in timed["html"].read_text() and timed["plot"].is_file()


def test_the_summary_against_the_faster_baseline_and_as_shipped():
    """Issue 27's figures: each task's speedup over the faster of eager and torch.compile, and the
    geomean as shipped (a kernel slower than that baseline is not shipped: the task stays 1.00x)."""
    rows = [
        {"task": "level1/a", "correct": True, "speedup_eager": 2.0, "speedup_compiled": 1.6},
        {"task": "level1/b", "correct": True, "speedup_eager": 1.2, "speedup_compiled": 0.5},
        {"task": "level1/c", "correct": True, "speedup_eager": 0.9, "speedup_compiled": None},
        {"task": "level1/d", "correct": False, "speedup_eager": 3.0, "speedup_compiled": 3.0},
    ]
    level = suite_summary(rows)["levels"]["level1"]
    assert level["geomean_speedup_fastest"] == pytest.approx((1.6 * 0.5 * 0.9) ** (1 / 3))
    assert level["shipped"] == 1
    assert level["geomean_shipped"] == pytest.approx(1.6 ** (1 / 3))
