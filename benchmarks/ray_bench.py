"""Benchmark of the Ray executor against the local pool: per-candidate overhead, verdicts, times.

Run:  python benchmarks/ray_bench.py [--reps 5] [--results FILE]
On a CUDA machine (one GPU is enough) it judges the example kernels of prompts/examples on their
tests/tasks at full size; without CUDA, at small sizes under the interpreter (verdicts and the
overhead only: interpreter times mean nothing). The local pool and the Ray path each get one
warm judge and the same candidates, one after the other (never at once: they would share the
device). Targets (issue 16): the same verdicts, candidate times within 3% on the GPU, and a Ray
overhead under 0.5 s per candidate. A row goes to --results only on CUDA.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
# (task, example kernel, sizes under the interpreter)
CASES = [
    ("gelu", "gelu", {"batch_size": 4, "dim": 300}),
    ("softmax", "softmax", {"batch_size": 4, "dim": 300}),
    ("layernorm", "layernorm", {}),
]


def variants(source: str, reps: int) -> list[str]:
    """`reps` distinct candidate texts of one kernel (a trailing comment: same kernel, so the
    compile is Triton's cached one after the first; a new source hash, so a new evaluation)."""
    return [f"{source}\n# ray_bench variant {i}\n" for i in range(reps)]


def judge(pool, task, sources, config) -> list[tuple[float, object]]:
    """(wall seconds, result) of each source, one at a time: the per-candidate latency."""
    out = []
    for source in sources:
        start = time.perf_counter()
        result = pool.submit(task, source, config).result()
        out.append((time.perf_counter() - start, result))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="candidates per task and path")
    parser.add_argument("--results", type=Path, default=None, help="append a row (CUDA only)")
    parser.add_argument("--ray-address", default=None, help="a cluster (default: a local Ray)")
    args = parser.parse_args()

    import torch
    import triton

    from kernelwright.cluster.ray_pool import RayPool
    from kernelwright.sandbox import EvalConfig, EvalPool
    from kernelwright.sandbox.task import load_task

    cuda = torch.cuda.is_available()
    rows = []
    with EvalPool(workers=1) as local, RayPool(args.ray_address, actors=1) as ray_pool:
        for name, example, small in CASES:
            sizes = {} if cuda else small
            task = load_task(ROOT / "tests" / "tasks" / f"{name}.py", sizes)
            source = (ROOT / "prompts" / "examples" / f"{example}.py").read_text()
            config = EvalConfig() if cuda else EvalConfig(trials=1, drift_calls=1)
            for pool in (local, ray_pool):  # warm: judge start, task setup, compile
                pool.submit(task, source, config).result()
            here = judge(local, task, variants(source, args.reps), config)
            there = judge(ray_pool, task, variants(source, args.reps), config)
            row = {
                "task": name,
                "verdicts_local": sorted({r.status for _, r in here}),
                "verdicts_ray": sorted({r.status for _, r in there}),
                "local_s": statistics.median(s for s, _ in here),
                "ray_s": statistics.median(s for s, _ in there),
            }
            row["overhead_s"] = row["ray_s"] - row["local_s"]
            if cuda:
                a = statistics.median(r.timings.candidate.median_ms for _, r in here)
                b = statistics.median(r.timings.candidate.median_ms for _, r in there)
                row["median_ms"] = [a, b]
                row["time_diff_pct"] = abs(a - b) / min(a, b) * 100
            row["ran_on"] = sorted(
                {f"{r.environment.node} {r.environment.gpu_index}" for _, r in there}
            )
            rows.append(row)
            print(json.dumps(row))
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0) if cuda else "cpu (interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "same_verdicts": all(r["verdicts_local"] == r["verdicts_ray"] for r in rows),
        "overhead_s": statistics.median(r["overhead_s"] for r in rows),
        "max_time_diff_pct": max((r["time_diff_pct"] for r in rows), default=None)
        if cuda
        else None,
    }
    print(json.dumps(summary, indent=2))
    if args.results and cuda:
        append_results(args.results, summary, rows)
    return 0 if summary["same_verdicts"] else 1


def append_results(path: Path, summary: dict, rows: list[dict]) -> None:
    from results_table import add_row

    add_row(
        path,
        "Ray executor vs the local pool (benchmarks/ray_bench.py)",
        "One warm judge each (the local EvalPool, one Ray actor on the same GPU), the example "
        "kernels of prompts/examples on their tests/tasks at full size, the same candidates one "
        "at a time through each. Overhead = median wall per candidate through Ray minus the "
        "local pool's (target under 0.5 s); times = the candidates' medians (target within 3%).",
        ["date", "GPU", "torch", "triton", "same verdicts", "overhead s", "time diff (max)"],
        [
            summary["date"],
            summary["gpu"],
            summary["torch"],
            summary["triton"],
            "yes" if summary["same_verdicts"] else "NO",
            f"{summary['overhead_s']:.3f}",
            f"{summary['max_time_diff_pct']:.2f}%",
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
