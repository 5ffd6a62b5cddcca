"""What the report tests share: results, run directories, suite rows, nightly history, and
the pixels and the browser that check the HTML."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelwright.report import run as report_run
from kernelwright.run.record import RunRecord
from kernelwright.sandbox.results import (
    Environment,
    EvalResult,
    Roofline,
    Timing,
    Timings,
)

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


def run_report_data(run_dir: Path) -> dict:
    """report.run.run_report_data of the run's record as `kernelwright report` reads it."""
    return report_run.run_report_data(RunRecord.load(run_dir))


def write_run_report(run_dir: Path) -> dict[str, Path]:
    return report_run.write_run_report(RunRecord.load(run_dir))


BEST = {
    "round": 3,
    "candidate": 0,
    "path": "round_03/cand_0/kernel.py",
    "speedup_eager": 2.0,
    "speedup_compiled": 1.5,
    "roofline_fraction": 0.55,
}


def write_gpu_run(tmp_path: Path) -> Path:
    """A three-round GPU run: failures, a rejection, and verified kernels up to 2x."""
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
