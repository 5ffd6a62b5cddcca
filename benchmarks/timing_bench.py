"""How much host launch overhead the evaluator's timer counts, with and without its GPU head start.

Run on a CUDA machine:  python benchmarks/timing_bench.py [--results benchmarks/RESULTS.md]
For eager GELU and a one-kernel Triton GELU at sizes from 4 MB to 1 GB, the median time from
sandbox.judge.timing.time_interleaved with head_start_us=0 and with the EvalConfig default, next to
triton.testing.do_bench (back-to-back launches, so its launch overhead hides behind the previous
call). The gap between the first column and the others is host time the timer would count as GPU
time; it only ever understates a speedup when the candidate's launch path is the slower one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent
SIZES_MB = (4, 32, 128, 1024)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()

    import torch
    import triton
    import triton.language as tl
    from triton.testing import do_bench

    from kernelwright.sandbox.judge.timing import time_interleaved

    if not torch.cuda.is_available():
        print("timing_bench: needs a CUDA GPU")
        return 2

    @triton.jit
    def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
        tl.store(y_ptr + offs, y, mask=mask)

    def triton_gelu(x):
        y = torch.empty_like(x)
        n = x.numel()
        _gelu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=8)
        return y

    def eager_gelu(x):
        return torch.nn.functional.gelu(x)

    default_us = 100.0  # the head start the judge v2 used (EvalConfig.head_start_us, gone in v3)
    rows = []
    for mb in SIZES_MB:
        x = torch.randn(mb * (1 << 20) // 4, device="cuda")
        fns = {
            "eager": (lambda i, x=x: (x,), eager_gelu),
            "triton": (lambda i, x=x: (x,), triton_gelu),
        }
        bare = time_interleaved(fns, reps=args.reps, warmup=5)
        ahead = time_interleaved(fns, reps=args.reps, warmup=5, head_start_us=default_us)
        for name, fn in (("eager", eager_gelu), ("triton", triton_gelu)):
            rows.append(
                {
                    "size_mb": mb,
                    "fn": name,
                    "no_head_start_ms": bare[name].median_ms,
                    "head_start_ms": ahead[name].median_ms,
                    "do_bench_ms": do_bench(lambda fn=fn, x=x: fn(x), return_mode="median"),
                }
            )
        del x
    stamp = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "head_start_us": default_us,
    }
    print(json.dumps({**stamp, "rows": rows}, indent=2))
    from results_table import add_row

    for r in rows:
        add_row(
            args.results,
            "Timer: host launch overhead (benchmarks/timing_bench.py)",
            "GELU (fp32) read+write of the given size. Medians in ms from the evaluator's "
            "timer without and with its GPU head start (EvalConfig.head_start_us), and from "
            "triton.testing.do_bench for reference.",
            [
                "date",
                "GPU",
                "torch",
                "triton",
                "size",
                "impl",
                "no head start",
                "head start",
                "do_bench",
            ],
            [
                stamp["date"],
                stamp["gpu"],
                stamp["torch"],
                stamp["triton"],
                f"{r['size_mb']} MB",
                r["fn"],
                f"{r['no_head_start_ms']:.4f}",
                f"{r['head_start_ms']:.4f} ({default_us:g} us)",
                f"{r['do_bench_ms']:.4f}",
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
