"""The runtime guard's overhead on unsampled calls: a guarded module vs the module called
directly, for a small and a large elementwise kernel (CUDA when available, else the CPU).

    python benchmarks/runtime_bench.py [--calls 2000] [--reps 7]

Prints one row per size: the median per-call time of each (a block of `calls` back-to-back calls,
synchronised once at its end, median of `reps` interleaved blocks) and the overhead in percent.
The issue's target is < 2% on the H200; figures from a CPU are CPU figures only.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
from torch import nn

from kernelwright.runtime import guard


class Gelu(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


def _block(fn, x, calls: int, cuda: bool) -> float:
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    where = torch.cuda.get_device_name() if cuda else f"CPU ({platform.processor() or 'host'})"
    print(f"# runtime guard overhead on {where}, torch {torch.__version__}")
    print("| elements | direct us/call | guarded us/call | overhead |")
    print("|---|---|---|---|")
    sizes = (1 << 12, 1 << 24) if cuda else (1 << 12, 1 << 20)
    for n in sizes:
        kernel = Gelu().to(device)
        guarded = guard(Gelu(), kernel, shadow_rate=0.0)  # every call unsampled
        x = torch.randn(n, device=device)
        with torch.inference_mode():
            for fn in (kernel, guarded):
                _block(fn, x, 50, cuda)  # warm-up
            direct, wrapped = [], []
            for _ in range(args.reps):  # interleaved, so drift hits both alike
                direct.append(_block(kernel, x, args.calls, cuda))
                wrapped.append(_block(guarded, x, args.calls, cuda))
        d, w = statistics.median(direct), statistics.median(wrapped)
        print(f"| {n} | {d * 1e6:.2f} | {w * 1e6:.2f} | {(w / d - 1) * 100:+.1f}% |")


if __name__ == "__main__":
    main()
