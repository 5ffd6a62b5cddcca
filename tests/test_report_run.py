"""Run reports: one run directory's data, verdict, files and plot."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path

import pytest
from test_report_support import (
    BEST,
    CPU,
    KERNEL,
    blue_pixels,
    failed,
    ok_result,
    run_report_data,
    write_gpu_run,
    write_run_dir,
    write_run_report,
)


@pytest.fixture
def gpu_run(tmp_path) -> Path:
    return write_gpu_run(tmp_path)


# -- run reports ----------------------------------------------------------------------------------


def test_run_report_data_per_round(gpu_run):
    data = run_report_data(gpu_run)
    rounds = data["rounds"]
    assert [r["candidates"] for r in rounds] == [2, 2, 2]
    assert rounds[0]["statuses"] == {"compile_error": 1, "incorrect": 1}
    assert rounds[0]["best_speedup_eager"] is None and rounds[0]["best_so_far_eager"] is None
    assert (rounds[1]["best_speedup_eager"], rounds[1]["best_speedup_compiled"]) == (1.4, 0.9)
    assert rounds[1]["best_roofline_fraction"] == 0.3
    assert [r["best_so_far_eager"] for r in rounds] == [None, 1.4, 2.0]
    assert [r["plan_summary"] for r in rounds] == [
        "fuse the scale",  # from round_01/plan.json
        "tile rows | wider blocks",  # from run.json
        "autotune BLOCK",
    ]
    assert data["best"]["round"] == 3 and data["best"]["speedup_eager"] == 2.0
    assert data["timings_meaningful"] and data["timing_note"] is None
    assert data["log"]["duration_s"] == 90.0 and data["log"]["events"] == 3
    assert data["verdict"].startswith("The best verified kernel (round 3, candidate 0) is 2.00x")
    assert "1.50x vs torch.compile" in data["verdict"] and "55% of the roofline" in data["verdict"]
    assert "3 of 6 candidates over 3 rounds" in data["verdict"]


def test_a_tuned_candidate_is_reported_with_the_sweeps_verdict(tmp_path):
    """The sweep's variant is the candidate's verdict (run.json's best says 2.66x): the round and
    candidate tables showed the seed's 2.39x beside it (level1/40 on the H200)."""
    best = {**BEST, "round": 1, "candidate": 0, "speedup_eager": 2.66, "speedup_compiled": 1.15}
    run_dir = write_run_dir(tmp_path, [[ok_result(2.39, 1.03, 0.74)]], best=best)
    cand = run_dir / "round_01" / "cand_0"
    (cand / "tuned.py").write_text(KERNEL.replace("BLOCK", "BLOCK_TUNED"))
    (cand / "tuned_result.json").write_text(ok_result(2.66, 1.15, 0.82).to_json())
    data = run_report_data(run_dir)
    (view,) = data["candidates"]
    assert (view["speedup_eager"], view["speedup_compiled"]) == (2.66, 1.15)
    assert view["summary"].endswith("(tuned by the sweep; the seed: 2.39x vs eager)")
    assert view["tuned_kernel"] == "round_01/cand_0/tuned.py"
    assert data["rounds"][0]["best_speedup_eager"] == 2.66
    html = write_run_report(run_dir)["html"].read_text()
    assert "round_01/cand_0/tuned.py" in html and "BLOCK_TUNED" in html


def test_report_shows_per_role_calls_answered_failed_why_and_retried(tmp_path):
    """Issue 13: the report named gpt-4o with "0 calls" and nothing else."""
    error = "server: server error (500): upstream down (gave up after 5 attempts: 4 retries spent)"
    usage = {
        "calls": 0,
        "failed_calls": 3,
        "refused_calls": 5,
        "failures": {"server": 3},
        "per_agent": {
            "planner": {
                "failed_calls": 1,
                "retries": 4,
                "failures": {"server": 1},
                "last_error": error,
            },
            "coder": {
                "failed_calls": 2,
                "retries": 8,
                "failures": {"server": 2},
                "last_error": error,
            },
            "critic": {"refused_calls": 5, "last_error": ""},
        },
    }
    extra = {
        "models": {"planner": "gpt-4o", "coder": "gpt-4o", "critic": "gpt-4o"},
        "usage": usage,
        "llm_unanswered": {"planner": error, "coder": error, "critic": "not sent"},
        "llm_switched_off": [{"endpoint": "http://x/v1", "model": "gpt-4o", "error": error}],
    }
    run_dir = write_run_dir(tmp_path, [[ok_result(1.2, 1.0, 0.5)]], extra=extra)
    md = write_run_report(run_dir)["markdown"].read_text()
    assert "## LLM calls per agent" in md
    assert f"| coder | gpt-4o | 2 | 0 | 2 (2 server) | 0 | 8 | 0 | 0 | – | {error} |" in md
    assert "| critic | gpt-4o | 0 | 0 | 0 | 5 | 0 |" in md
    assert "0 calls answered (0 cached), 3 failed (3 server), 5 not sent" in md
    assert "The configured model answered no call for planner (gpt-4o), coder (gpt-4o)" in md


def test_run_report_files_carry_the_numbers(gpu_run):
    paths = write_run_report(gpu_run)
    assert set(paths) == {"markdown", "json", "plot", "html"}
    assert all(p.parent == gpu_run and p.stat().st_size > 0 for p in paths.values())
    md = paths["markdown"].read_text()
    assert (
        "| 2 | 2 | 1 ok, 1 rejected | 1.40x | 0.90x | 30% | 1.40x | tile rows \\| wider blocks |"
        in md
    )
    assert "| 3 | 2 | 2 ok | 2.00x | 1.50x | 55% | 2.00x | autotune BLOCK |" in md
    assert "| coder | gpt-x | 4 | 4 | 0 | 0 | 0 | 5,000 | 2,000 | $0.0450 | – |" in md
    assert "| planner | gpt-x | 3 | 3 | 0 | 0 | 0 | 1,200 | 300 | $0.0100 | – |" in md
    assert "stop reason: patience" in md and "NVIDIA H100, torch 2.11.0, triton 3.6.0" in md
    assert "![Best speedup per round](speedup_per_round.png)" in md
    assert "interpreter" not in md.lower()
    data = json.loads(paths["json"].read_text())
    assert data["rounds"][2]["best_speedup_eager"] == 2.0
    assert data["usage"]["per_agent"]["coder"]["prompt_tokens"] == 5000
    assert [c["status"] for c in data["candidates"]] == [
        "compile_error",
        "incorrect",
        "ok",
        "rejected",
        "ok",
        "ok",
    ]
    assert data["candidates"][1]["rule"] == "mismatch"
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert blue_pixels(paths["plot"]) > 100


def test_run_report_html_is_self_contained_and_escaped(gpu_run):
    page = write_run_report(gpu_run)["html"].read_text()
    assert "<script" not in page  # the kernel's comment is shown, not run
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Content-Security-Policy" in page
    assert re.search(r'<img class="plot" alt="[^"]+" src="data:image/png;base64,', page)
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing to fetch
    assert page.count("<details") == 7  # best.py and six candidates
    assert '<span class="nd">@triton</span>' in page  # pygments' decorator class


def test_interpreter_run_says_times_are_not_meaningful(tmp_path):
    run_dir = write_run_dir(
        tmp_path,
        [[ok_result(1.0, 1.0, 0.0, env=CPU), failed("incorrect", "mismatch", env=CPU)]],
        env=CPU,
    )
    data = run_report_data(run_dir)
    assert not data["timings_meaningful"]
    assert "Triton interpreter" in data["timing_note"]
    assert "speed is unknown" in data["verdict"]
    md = write_run_report(run_dir)["markdown"].read_text()
    assert "> **Note.** Times are not meaningful" in md
    assert "| 1 | 2 | 1 ok, 1 incorrect | – | – | – | – |" in md


def test_interpreter_run_report_says_it_once_and_shows_no_empty_chart(tmp_path):
    # issue 25: finalize's note repeated the banner's first half in the same box, and an empty
    # speedup chart took the top of the page on CPU.
    finalize_note = (
        "Times are not meaningful: no CUDA here, candidates ran under the Triton interpreter "
        "(correctness only); best is the first verified candidate."
    )
    run_dir = write_run_dir(
        tmp_path,
        [[ok_result(1.0, 1.0, 0.0, env=CPU)]],
        env=CPU,
        extra={"verdict_note": finalize_note, "timing_meaningful": False},
    )
    (run_dir / "speedup_per_round.png").write_bytes(b"an earlier report's chart")
    paths = write_run_report(run_dir)
    note = run_report_data(run_dir)["timing_note"]
    assert note.lower().count("not meaningful") == 1
    assert note.endswith("(best is the first verified candidate.)")
    page, md = paths["html"].read_text(), paths["markdown"].read_text()
    [box] = re.findall(r'<p class="note">(.*?)</p>', page)
    [quote] = [line for line in md.splitlines() if line.startswith("> **Note.**")]
    assert box.lower().count("not meaningful") == 1 and quote.lower().count("not meaningful") == 1
    assert "<img" not in page and "speedup_per_round.png" not in md and "plot" not in paths
    assert not (run_dir / "speedup_per_round.png").exists()
    gpu = write_run_report(write_gpu_run(tmp_path / "gpu"))  # where there are times: the chart
    assert "<img" in gpu["html"].read_text() and gpu["plot"].is_file()


def test_run_json_fields_the_agents_write_are_honoured(tmp_path):
    extra = {
        "timing_meaningful": False,
        "verdict_note": "no CUDA: task shrunk to N=64",
        "stop_detail": "no gain for 2 rounds",
        "environment": {
            "python": "3.11.7",
            "torch": "2.13.0",
            "triton": "3.7.0",
            "cuda": False,
            "gpu": "",
            "interpreter": True,
        },
        "candidates": [
            {"round": 1, "candidate": 0, "origin": "llm", "idea": "one pass", "status": "ok"},
            {
                "round": 1,
                "candidate": 1,
                "origin": "llm",
                "idea": "two passes",
                "status": "duplicate",
                "summary": "the same file as round_01/cand_0",
            },
        ],
    }
    run_dir = write_run_dir(
        tmp_path,
        [[ok_result(1.0, 1.0, 0.0, env=CPU)]],
        env=CPU,
        extra=extra,
        best={"round": 1, "candidate": 0, "path": "best.py", "speedup_eager": None},
    )
    data = run_report_data(run_dir)
    assert [(c["candidate"], c["status"], c["idea"]) for c in data["candidates"]] == [
        (0, "ok", "one pass"),
        (1, "duplicate", "two passes"),  # listed in run.json, never written to disk
    ]
    assert data["timing_note"].endswith("(no CUDA: task shrunk to N=64)")
    assert "speed is unknown" in data["verdict"]
    assert data["verdict"].endswith(
        "Stopped: patience (no gain for 2 rounds). Judged in fp32, precision strict."
    )
    md = write_run_report(run_dir)["markdown"].read_text()
    assert "| Environment | cpu, torch 2.13.0, triton 3.7.0, Triton interpreter |" in md
    row = "| 1 | 1 | two passes | duplicate | – | – | – | – | the same file as round_01/cand_0 |"
    assert row in md


def test_a_duplicate_shows_the_candidate_it_repeats_with_its_verdict(tmp_path):
    """A duplicate has its kernel.py but no result.json: it read as "pending (not evaluated
    yet)" in a finished run. It is the earlier candidate again, with that one's verdict."""
    rows = [
        {"round": 1, "candidate": 0, "status": "ok"},
        {"round": 2, "candidate": 0, "status": "duplicate", "duplicate_of": "round_01/cand_0",
         "summary": "same source as round_01/cand_0 (ok)"},
    ]  # fmt: skip
    run_dir = write_run_dir(
        tmp_path, [[ok_result(1.4, 0.9, 0.3)], [None]], best=BEST, extra={"candidates": rows}
    )
    (_, dup) = run_report_data(run_dir)["candidates"]
    assert dup["status"] == "duplicate" and dup["duplicate_of"] == "round_01/cand_0"
    assert dup["summary"] == (
        "duplicate of round_01/cand_0 (the same source; not evaluated again): "
        "ok, 1.40x vs eager, 0.90x vs torch.compile, 30% of roofline"
    )
    files = write_run_report(run_dir)
    md, page = files["markdown"].read_text(), files["html"].read_text()
    assert "pending" not in md and "not evaluated yet" not in md
    assert "| 2 | 0 | – | duplicate | – | – | – | – | duplicate of round_01/cand_0 " in md
    assert "1 duplicate" in md and '<span class="badge pending">duplicate</span>' in page
    # A run killed before its finalize has no candidates in run.json: the events still say.
    (run_dir / "run.json").write_text(
        json.dumps({**json.loads((run_dir / "run.json").read_text()), "candidates": []})
    )
    skipped = {"event": "candidate.skipped", "round": 2, "index": 0, "status": "duplicate",
               "summary": "same source as round_01/cand_0 (ok)"}  # fmt: skip
    with open(run_dir / "events.jsonl", "a") as f:
        f.write(json.dumps(skipped) + "\n")
    (_, dup) = run_report_data(run_dir)["candidates"]
    assert dup["status"] == "duplicate"
    assert dup["summary"].endswith("1.40x vs eager, 0.90x vs torch.compile, 30% of roofline")


def test_reports_say_the_dtype_precision_and_sizes_that_ran(tmp_path):
    """A bf16 run read exactly like an fp32 one: dtype, precision policy and the sizes used (the
    CPU shrink included) are in the verdict and the facts of report.md and report.html."""
    from kernelwright.report.verdict import verdict
    from kernelwright.sandbox.results import Correctness

    checked = Correctness(trials=1, shapes=({"N": 64}, {"N": 55}))
    result = dataclasses.replace(ok_result(1.0, 1.0, 0.0, env=CPU), correctness=checked)
    extra = {
        "config": {"dtype": "bf16", "precision": "tf32-ok", "shapes": {"N": 64}},
        "sizes": {"N": 64},
        "task_sizes": {"N": 4096},
        "sized_by": "shrink",
    }
    best = {"round": 1, "candidate": 0, "path": "best.py", "speedup_eager": None}
    run_dir = write_run_dir(tmp_path, [[result]], env=CPU, extra=extra, best=best)
    said = (
        "bf16, precision tf32-ok, at N=64: shrunk for the Triton interpreter (no CUDA) from the "
        "task's N=4096; also checked at N=55"
    )
    data = run_report_data(run_dir)
    assert data["judged"] == said and data["verdict"].endswith(f"Judged in {said}.")
    files = write_run_report(run_dir)
    assert f"| Judged | {said} |" in files["markdown"].read_text()
    assert said in html.unescape(files["html"].read_text())
    run = json.loads((run_dir / "run.json").read_text())
    assert "Judged in bf16, precision tf32-ok, at N=64: shrunk for the Triton" in verdict(run)
    # --shape sizes and the task's own sizes are told apart from the shrink.
    shaped = {**run, "sized_by": "shape"}
    assert "at N=64 (set with --shape; the task's own: N=4096)" in verdict(shaped)
    own = {**run, "sizes": {"N": 4096}, "sized_by": "task", "config": {"dtype": "fp32"}}
    assert "Judged in fp32, precision strict, at N=4096 (the task's own sizes)." in verdict(own)


def test_evaluator_errors_are_counted_apart_from_the_candidates(tmp_path):
    internal = failed("crashed", "worker-start", "the evaluator's worker process died")
    run_dir = write_run_dir(tmp_path, [[failed("incorrect", "mismatch"), internal]])
    data = run_report_data(run_dir)
    assert [v["fault"] for v in data["candidates"]] == ["candidate", "evaluator"]
    assert data["evaluator_errors"] == 1
    assert (
        "1 evaluator error (kernelwright's fault, not the candidate's: it was not judged)"
        in (data["verdict"])
    )


def test_run_without_a_verified_kernel_keeps_the_reference(tmp_path):
    run_dir = write_run_dir(
        tmp_path, [[failed("timeout", "wall-time"), None], [failed("crashed", "signal")]]
    )
    data = run_report_data(run_dir)
    assert data["best"] is None
    assert data["candidates"][1]["status"] == "pending"  # no result.json yet
    assert data["verdict"] == (
        "No candidate passed verification: 3 candidates over 2 rounds (1 timeout, 1 crashed, "
        "1 pending). Keep the PyTorch reference. Stopped: patience. Judged in fp32, precision "
        "strict."
    )
    write_run_report(run_dir)  # and the files still get written


def test_slower_best_is_reported_as_no_win(tmp_path):
    run_dir = write_run_dir(tmp_path, [[ok_result(0.8, 0.5, 0.1)]])
    data = run_report_data(run_dir)
    assert data["best"]["speedup_eager"] == 0.8  # computed: run.json names no best
    assert data["verdict"].startswith("No win: the best verified kernel (round 1, candidate 0)")


def test_not_a_run_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"run\.json"):
        run_report_data(tmp_path)
