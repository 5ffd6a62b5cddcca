"""Tests of the reports: run, suite and nightly metrics, their files, and the HTML in Chromium."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelwright.report import (
    highlight_python,
    nightly_changes,
    run_report_data,
    suite_row,
    suite_summary,
    write_nightly_report,
    write_run_report,
    write_suite_report,
)
from kernelwright.sandbox.results import (
    Environment,
    EvalResult,
    Roofline,
    Timing,
    Timings,
)
from kernelwright.store import Store

GPU = Environment(device="cuda", gpu="NVIDIA H100", torch="2.11.0", triton="3.6.0")
CPU = Environment(device="cpu", torch="2.13.0", triton="3.7.0", interpreter=True)

KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # </pre><script>alert(1)</script>
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


BLOCK = 1024  # tune: 256, 512, 1024
"""


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p25_ms=ms, p75_ms=ms, min_ms=ms, max_ms=ms, reps=50)


def ok_result(
    eager: float, compiled: float, fraction: float, env=GPU, candidate_ms: float = 1.0
) -> EvalResult:
    """A verified result `eager` and `compiled` times faster than the baselines."""
    meaningful = not env.interpreter
    timings = (
        Timings(
            meaningful=True,
            candidate=timing(candidate_ms),
            eager=timing(eager * candidate_ms),
            compiled=timing(compiled * candidate_ms),
        )
        if meaningful
        else Timings(meaningful=False, note="TRITON_INTERPRET=1")
    )
    return EvalResult(
        status="ok",
        task="scale",
        task_hash="t1",
        source_hash=f"s{eager}",
        timings=timings,
        speedup_eager=eager if meaningful else None,
        speedup_compiled=compiled if meaningful else None,
        roofline=Roofline(8_000_000, 0, 3000.0, 900.0, 0.3, "memory", fraction=fraction)
        if meaningful
        else None,
        environment=env,
    )


def failed(status: str, rule: str | None = None, message: str = "", env=GPU) -> EvalResult:
    return EvalResult(
        status=status,  # type: ignore[arg-type]
        rule=rule,
        message=message,
        task="scale",
        task_hash="t1",
        environment=env,
    )


def write_run_dir(
    root: Path,
    rounds: list[list[EvalResult | None]],
    *,
    best=None,
    env=GPU,
    name="scale",
    extra: dict | None = None,
) -> Path:
    """A fake run directory in the brief's format: run.json, round_NN/cand_K/, events, best.py."""
    run_dir = root / "run-1"
    for r, results in enumerate(rounds, start=1):
        for k, result in enumerate(results):
            cand = run_dir / f"round_{r:02d}" / f"cand_{k}"
            cand.mkdir(parents=True)
            (cand / "kernel.py").write_text(KERNEL.replace("2.0", f"{r}.{k}"))
            if result is not None:
                (cand / "result.json").write_text(result.to_json(indent=2))
    (run_dir / "round_01" / "plan.json").write_text(json.dumps({"summary": "fuse the scale"}))
    if best is not None:
        (run_dir / "best.py").write_text(KERNEL)
    run = {
        "run_id": "run-1",
        "task": "tasks/scale.py",
        "task_name": name,
        "task_hash": "t1" * 16,
        "created": "2025-03-01T10:00:00+00:00",
        "config": {"rounds": len(rounds), "candidates": 2},
        "models": {"planner": "gpt-x", "coder": "gpt-x", "critic": None},
        "status": "done",
        "stop_reason": "patience",
        "best": best,
        "usage": {
            "calls": 7,
            "prompt_tokens": 6200,
            "completion_tokens": 2300,
            "cached_calls": 1,
            "cost_usd": 0.055,
            "per_agent": {
                "coder": {
                    "calls": 4,
                    "prompt_tokens": 5000,
                    "completion_tokens": 2000,
                    "cost_usd": 0.045,
                },
                "planner": {
                    "calls": 3,
                    "prompt_tokens": 1200,
                    "completion_tokens": 300,
                    "cost_usd": 0.01,
                },
            },
        },
        "environment": {
            "gpu": env.gpu,
            "device": env.device,
            "torch": env.torch,
            "triton": env.triton,
            "interpreter": env.interpreter,
        },
        "rounds": [
            {"round": 2, "plan_summary": "tile rows | wider blocks", "best_speedup_eager": 1.4},
            {"round": 3, "plan_summary": "autotune BLOCK", "best_speedup_eager": 2.0},
        ][: max(0, len(rounds) - 1)],
    }
    (run_dir / "run.json").write_text(json.dumps({**run, **(extra or {})}, indent=2))
    events = [
        {"ts": "2025-03-01T10:00:00+00:00", "event": "start"},
        {"ts": "2025-03-01T10:00:30+00:00", "event": "round"},
        {"ts": "2025-03-01T10:01:30+00:00", "event": "finish"},
    ]
    lines = [json.dumps(e) for e in events] + ['{"ts": "2025-03-01T10:0']  # cut by a kill
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


BEST = {
    "round": 3,
    "candidate": 0,
    "path": "round_03/cand_0/kernel.py",
    "speedup_eager": 2.0,
    "speedup_compiled": 1.5,
    "roofline_fraction": 0.55,
}


@pytest.fixture
def gpu_run(tmp_path) -> Path:
    return write_run_dir(
        tmp_path,
        [
            [
                failed("compile_error", message="CompilationError at 3:4"),
                failed("incorrect", "mismatch", "12 of 4096 differ"),
            ],
            [ok_result(1.4, 0.9, 0.3), failed("rejected", "import", "import os")],
            [ok_result(2.0, 1.5, 0.55), ok_result(1.8, 1.2, 0.5)],
        ],
        best=BEST,
    )


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
    assert '<span class="dc">@triton.jit</span>' in page


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
    from kernelwright.run.rundir import verdict
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
    assert html.escape(said) in files["html"].read_text()
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


def test_highlighter_escapes_everything_and_keeps_the_text():
    source = KERNEL + "s = 'it\\'s <b>' + \"\"\"unterminated\n"
    out = highlight_python(source)
    assert html.unescape(re.sub(r"<[^>]+>", "", out)) == source
    assert "<b>" not in out and "<script>" not in out
    assert '<span class="kw">def</span> <span class="fn">_scale_kernel</span>' in out
    assert '<span class="tl">tl.program_id</span>(<span class="nb">0</span>)' in out
    assert '<span class="cm"># tune: 256, 512, 1024</span>' in out
    assert '<span class="st">&#x27;it\\&#x27;s &lt;b&gt;&#x27;</span>' in out
    assert '<span class="nb">2.0</span>' in out
    assert html.unescape(re.sub(r"<[^>]+>", "", highlight_python("tlx"))) == "tlx"
    assert highlight_python("a @ b") == "a @ b"  # matmul, not a decorator


# -- suite reports --------------------------------------------------------------------------------

SUITE = [
    {
        "task": "a",
        "correct": True,
        "speedup_eager": 2.0,
        "speedup_compiled": 1.2,
        "roofline_fraction": 0.6,
    },
    {
        "task": "b",
        "correct": True,
        "speedup_eager": 1.5,
        "speedup_compiled": 0.5,
        "roofline_fraction": 0.4,
    },
    {"task": "c", "correct": True, "speedup_eager": 0.5, "speedup_compiled": 0.25},
    {
        "task": "d",
        "correct": False,
        "status": "incorrect",
        "speedup_eager": 3.0,
        "speedup_compiled": 3.0,
    },
    {"task": "e", "correct": True, "speedup_eager": None, "speedup_compiled": None},
]


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


# -- nightly reports ------------------------------------------------------------------------------


def night(task, n, status="ok", ms=1.0, speedup=2.0, rule=None, gpu="NVIDIA H100"):
    return {
        "task_hash": task,
        "task_name": task,
        "night": f"2025-03-0{n}",
        "variant": "fp32",
        "env_key": f"{gpu}|torch 2.11.0|triton 3.6.0",
        "status": status,
        "rule": rule,
        "candidate_ms": ms if status == "ok" else None,
        "speedup_eager": speedup if status == "ok" else None,
    }


HISTORY = [
    night("softmax", 1, ms=1.00, speedup=2.0),
    night("softmax", 2, ms=1.02, speedup=1.96),
    night("softmax", 3, ms=1.20, speedup=1.67),
    night("gelu", 1, speedup=1.5),
    night("gelu", 2, speedup=1.5),
    night("gelu", 3, "incorrect", rule="mismatch"),
    night("layernorm", 2, ms=1.00, speedup=1.3),
    night("layernorm", 3, ms=1.05, speedup=1.24),
    night("matmul", 3, ms=2.0, speedup=0.9),
    night("softmax", 1, ms=9.0, speedup=1.1, gpu="NVIDIA A100"),  # another GPU: its own series
]


def test_nightly_changes_flag_failures_and_slowdowns():
    changes = {(c["task"], c["env_key"].split("|")[0]): c for c in nightly_changes(HISTORY)}
    soft = changes[("softmax", "NVIDIA H100")]
    assert soft["regression"] and soft["slowdown"] == pytest.approx(1.20 / 1.02 - 1)
    assert soft["reason"] == "18% slower than 2025-03-02"
    gelu = changes[("gelu", "NVIDIA H100")]
    assert gelu["regression"] and gelu["reason"] == "now incorrect [mismatch]"
    ln = changes[("layernorm", "NVIDIA H100")]
    assert not ln["regression"] and ln["slowdown"] == pytest.approx(0.05)
    assert not changes[("matmul", "NVIDIA H100")]["regression"]  # first night: nothing to compare
    a100 = changes[("softmax", "NVIDIA A100")]
    assert not a100["regression"] and a100["previous_night"] is None
    assert [c["regression"] for c in nightly_changes(HISTORY)][:2] == [True, True]  # first
    looser = {c["task"]: c for c in nightly_changes(HISTORY, slowdown=0.2) if c["previous_night"]}
    assert not looser["softmax"]["regression"] and looser["gelu"]["regression"]


def test_nightly_report_from_store_history(tmp_path):
    store = Store(tmp_path / "kw.db")
    for n, ms in ((1, 1.0), (2, 1.3)):  # eager stays at 2 ms, the kernel gets 30% slower
        r = ok_result(2.0 / ms, 1.0, 0.5, candidate_ms=ms)
        store.record_verification(r, task_name="scale", night=f"2025-03-0{n}")
    paths = write_nightly_report(store.history(), tmp_path / "nightly")
    md = paths["markdown"].read_text()
    assert md.splitlines()[2].startswith("1 regression among 1 kernel, night 2025-03-02 (")
    row = "| scale | NVIDIA H100 | 2025-03-02 | ok | 1.54x | 1.3 ms | 2025-03-01 | 2.00x | +30.0%"
    assert row in md
    data = json.loads(paths["json"].read_text())
    assert data["regressions"] == 1 and data["changes"][0]["reason"] == "30% slower than 2025-03-01"
    assert blue_pixels(paths["plot"]) > 50


# -- the HTML in a real browser -------------------------------------------------------------------


def blue_pixels(png: Path, rgb=(0x1F, 0x77, 0xB4), tol=12) -> int:
    """Pixels within `tol` of matplotlib's first colour: the plots' main series."""
    import matplotlib.image
    import numpy as np

    img = matplotlib.image.imread(str(png))
    pixels = (img[..., :3] * 255.0 if img.dtype != np.uint8 else img[..., :3]).astype(int)
    return int((np.abs(pixels - np.array(rgb)).max(axis=-1) <= tol).sum())


def chromium_binary() -> str | None:
    candidates = [os.environ.get("KERNELWRIGHT_CHROMIUM", "")]
    candidates += ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
    return next((shutil.which(c) for c in candidates if c and shutil.which(c)), None)


def chromium(page: Path, tmp_path: Path, *args: str) -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary (.ci/chromium.sh installs Debian's chromium)")
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        *args,
        page.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


PLOTS = {
    "run": "speedup_per_round.png",
    "suite": "suite_speedups.png",
    "nightly": "nightly_trend.png",
}


@pytest.mark.parametrize("kind", ["run", "suite", "nightly"])
def test_html_report_renders_in_headless_chromium(kind, tmp_path, gpu_run):
    if kind == "run":
        page, table_class, rows = write_run_report(gpu_run)["html"], "rounds", 3
    elif kind == "suite":
        page, table_class, rows = write_suite_report(SUITE, tmp_path / "s")["html"], "tasks", 5
    else:
        page = write_nightly_report(HISTORY, tmp_path / "n")["html"]
        table_class, rows = "nightly", 5
    dom = chromium(page, tmp_path, "--dump-dom")
    table = re.search(rf'<table class="{table_class}">(.*?)</table>', dom, re.S)
    assert table is not None, dom[:2000]
    assert table.group(1).count("<tr>") == rows + 1  # the header row, then one per item
    assert re.search(r'<img class="plot"[^>]* src="data:image/png;base64,', dom)
    shot = tmp_path / "shot.png"
    chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars")
    # The plot's blue series reaches the screen only if the embedded PNG was decoded and laid
    # out (at its natural size: every plot is narrower than the page).
    in_png = blue_pixels(page.parent / PLOTS[kind])
    assert in_png > 50 and blue_pixels(shot) >= in_png // 2, "the plot did not render"


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
