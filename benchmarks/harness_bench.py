"""Benchmark of the evaluator itself: latency per candidate, throughput, repeatability.

Run on a CUDA machine:  python benchmarks/harness_bench.py [--results benchmarks/RESULTS.md]
Targets (issue 2): a warm evaluation of a candidate on a 1 GB elementwise task costs at most
2 s beyond its Triton compile; at least 30 small candidates per minute per GPU; one kernel
evaluated twice in separate evaluations gives medians within 2%.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent
TASK = HERE / "level1" / "01_relu.py"  # (4096, 32768) fp32: 0.54 GB read + 0.54 GB written

# A ReLU candidate; `variant` changes the kernel's text (a different constant folded into a
# no-op), so each variant is a new kernel that Triton must compile.
CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = {block}  # tune: 1024, 2048, 4096


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.maximum(x, 0.0) * {one}
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
        return y
"""


def candidate(variant: int, block: int = 4096) -> str:
    # 1.0 written differently per variant: same arithmetic, different kernel source.
    return CANDIDATE.format(block=block, one=f"(1.0 + 0.0 * {variant})")


def timed(pool, task, source, config):
    start = time.perf_counter()
    result = pool.submit(task, source, config).result()
    return time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--small", type=int, default=40, help="small candidates for throughput")
    parser.add_argument("--json", type=Path, default=None, help="also write raw numbers here")
    parser.add_argument(
        "--throughput-only", action="store_true", help="only the small candidates' throughput"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="judges on the one GPU for the throughput (their timed sections take turns)",
    )
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="seconds from this script's start after which the throughput counts the candidates "
        "finished so far, drops the rest and reports (a device call's step limit then still "
        "yields a figure)",
    )
    args = parser.parse_args()
    args.began = time.perf_counter()

    import torch

    from kernelwright.sandbox import EvalConfig, EvalPool
    from kernelwright.sandbox.task import load_task

    if not torch.cuda.is_available():
        print("harness_bench: needs a CUDA GPU (times under the interpreter mean nothing)")
        return 2
    task = load_task(TASK)
    config = EvalConfig()
    numbers: dict[str, object] = {}

    def say(key: str, value: object) -> None:
        numbers[key] = value
        print(f"  {key}: {value}", flush=True)

    if args.throughput_only:
        return throughput(args, config, numbers, say)
    with EvalPool(workers=1) as pool:
        # Cold: worker start, task setup (reference, other shape, torch.compile), compile, checks.
        cold, r = timed(pool, task, candidate(0), config)
        assert r.ok, r.summary()
        say("cold_s", cold)
        numbers["setup_note"] = "worker start + reference + variant + torch.compile + compile"
        # Warm, new kernel: the task is set up; the candidate pays its compile and its checks.
        warm_new = [timed(pool, task, candidate(v), config)[0] for v in (1, 2, 3)]
        # Warm, same kernel text again: Triton's on-disk cache skips the compile, so this is
        # the evaluator's own cost beyond compiling.
        cached_runs = [timed(pool, task, candidate(v), config) for v in (1, 2, 3)]
        warm_cached = [s for s, _ in cached_runs]
        say("warm_new_kernel_s", statistics.median(warm_new))
        say("warm_beyond_compile_s", statistics.median(warm_cached))
        # Where a warm evaluation's time goes (the evaluator's own per-step wall times).
        numbers["warm_phases_s"] = {
            k: round(statistics.median(r.phases_s.get(k, 0.0) for _, r in cached_runs), 3)
            for k in cached_runs[0][1].phases_s
        }
        numbers["compile_estimate_s"] = (
            numbers["warm_new_kernel_s"] - numbers["warm_beyond_compile_s"]
        )
        # Repeatability: the same kernel judged in two separate evaluations.
        _, a = timed(pool, task, candidate(10), config)
        _, b = timed(pool, task, candidate(10), config)
        ma, mb = a.timings.candidate.median_ms, b.timings.candidate.median_ms
        say("repeat_medians_ms", [ma, mb])
        say("repeat_diff_pct", abs(ma - mb) / min(ma, mb) * 100)
        numbers["speedup_eager"] = a.speedup_eager
        numbers["roofline_fraction"] = a.roofline.fraction if a.roofline else None
        numbers["environment"] = a.environment.key
    return throughput(args, config, numbers, say)


def throughput(args, config, numbers: dict, say) -> int:
    """Many small candidates (each a new kernel) through one warm GPU worker."""
    import torch
    import triton

    from kernelwright.sandbox import EvalPool
    from kernelwright.sandbox.task import load_task

    small = load_task(TASK, {"batch_size": 256, "dim": 4096})
    deadline = None if args.deadline_s is None else args.began + args.deadline_s
    pool = EvalPool(workers=args.workers, devices=["cuda:0"])
    try:
        warm = [pool.submit(small, candidate(100 + i), config) for i in range(args.workers)]
        for f in warm:  # every worker started, the task set up in each
            f.result()
        start = time.perf_counter()
        say("warm_up_s", round(start - args.began, 1))  # the judges' starts and the task's setup
        futures = [pool.submit(small, candidate(200 + i), config) for i in range(args.small)]
        results = []
        for i, f in enumerate(futures):
            left = None if deadline is None else deadline - time.perf_counter()
            try:
                results.append(f.result(timeout=None if left is None else max(0.0, left)))
            except concurrent.futures.TimeoutError:
                print(f"  deadline: {i} of {args.small} candidates finished, the rest dropped")
                break
            r = results[-1]
            t = r.timings.candidate if r.timings else None
            print(
                f"  candidate {i}: {r.status} at {time.perf_counter() - start:.1f} s"
                + (f", {t.median_ms:.4f} ms a call" if t else "")
                + ", phases "
                + ", ".join(f"{k} {v:.2f}" for k, v in (r.phases_s or {}).items()),
                flush=True,
            )
            if not r.ok or i < 2:  # what the judge took out, for the record
                print(f"    {r.summary()}\n    timing: {r.timings.note if r.timings else ''}")
        elapsed = time.perf_counter() - start
    finally:
        pool.close(cancel=True)  # anything not finished is dropped, never judged half-way
    bad = [r.summary() for r in results if not r.ok]
    if not results:
        print("harness_bench: no candidate finished before the deadline: no figure")
        return 1
    say("small_candidates", len(results))
    say("workers", args.workers)
    say("candidates_per_minute", len(results) / elapsed * 60)
    assert not bad, bad[:3]

    row = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        **numbers,
    }
    print(json.dumps(row, indent=2))
    if args.json:
        args.json.write_text(json.dumps(row, indent=2))
    append_results(args.results, row)
    return 0


def append_results(path: Path, row: dict) -> None:
    from results_table import add_row

    add_row(
        path,
        "Evaluator latency and throughput (benchmarks/harness_bench.py)",
        "Task: level1/01_relu (1.07 GB per call, fp32). Cold = first candidate of a new pool "
        "(worker start, reference, other shape, torch.compile, Triton compile). Warm = the next "
        "candidates on the same task; 'beyond compile' = the same kernel text again, so Triton's "
        "cache skips the compile. Throughput: distinct small kernels (256x4096) through one GPU "
        "worker. Repeat: one kernel judged in two separate evaluations (target: within 2%).",
        [
            "date",
            "GPU",
            "torch",
            "triton",
            "cold s",
            "warm s (new kernel)",
            "warm s beyond compile",
            "candidates/min",
            "repeat medians ms (diff)",
            "warm steps s",
        ],
        [
            row["date"],
            row["gpu"],
            row["torch"],
            row["triton"],
            _fmt(row, "cold_s", "{:.1f}"),
            _fmt(row, "warm_new_kernel_s", "{:.2f}"),
            _fmt(row, "warm_beyond_compile_s", "{:.2f}"),
            _fmt(row, "candidates_per_minute", "{:.0f}") + f" ({row.get('workers', 1)} judge(s))",
            (
                f"{row['repeat_medians_ms'][0]:.4f} / {row['repeat_medians_ms'][1]:.4f} "
                f"({row['repeat_diff_pct']:.2f}%)"
                if "repeat_medians_ms" in row
                else "not run"
            ),
            (
                ", ".join(f"{k} {v:.2f}" for k, v in row["warm_phases_s"].items())
                if "warm_phases_s" in row
                else "not run"
            ),
        ],
    )


def _fmt(row: dict, key: str, spec: str) -> str:
    """A figure of the row, or 'not run' where this invocation (--throughput-only) skipped it."""
    return spec.format(row[key]) if key in row else "not run"


if __name__ == "__main__":
    sys.exit(main())
