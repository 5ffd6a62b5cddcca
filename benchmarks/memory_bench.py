"""Benchmark of the evaluator's memory: judge's and candidate's peaks beside each task's footprint.

Run on a CUDA machine:  python benchmarks/memory_bench.py TASK.py... [--results RESULTS.md]
For each task, the offline coder's candidate (the fusion codegen) is evaluated at the task's own
sizes; the table gives the task's footprint (inputs, outputs and parameters), the reference's
peak, the candidate's peak and the judge's own peak, and the judge's peak over its bound
(4x the footprint + 1 GiB, issue 12). Tasks without an offline candidate are listed as such.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GIB = 2**30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--results", type=Path, default=None, help="append the table here")
    parser.add_argument("--dtype", default="fp32")
    args = parser.parse_args()

    import torch
    import triton

    from kernelwright.codegen import generate
    from kernelwright.sandbox import EvalConfig, EvalPool

    if not torch.cuda.is_available():
        print("memory_bench needs a CUDA device: device memory is not measured on CPU")
        return 2
    config = EvalConfig(dtype=args.dtype, compile_baseline=False)
    rows = []
    with EvalPool(workers=1) as pool:
        for path in args.tasks:
            fused = generate(str(path), dtype=args.dtype)
            if fused.source is None:
                rows.append(f"| {path.name} | no offline candidate | | | | | |")
                continue
            result = pool.submit(str(path), fused.source, config).result()
            m = result.memory
            if m is None:
                rows.append(f"| {path.name} | {result.summary()[:60]} | | | | | |")
                continue
            bound = 4 * m.footprint_bytes + GIB
            rows.append(
                f"| {path.name} | {result.status} | {_g(m.footprint_bytes)} | "
                f"{_g(m.reference_peak_bytes)} | {_g(m.candidate_peak_bytes)} | "
                f"{_g(m.judge_peak_bytes)} | {(m.judge_peak_bytes or 0) / bound:.2f} |"
            )
            print(rows[-1], flush=True)
    header = [
        f"### memory_bench, {datetime.date.today()}, {torch.cuda.get_device_name(0)}, "
        f"torch {torch.__version__}, triton {triton.__version__}",
        "",
        "| task | status | footprint GiB | reference peak | candidate peak | judge peak | "
        "judge / (4x footprint + 1 GiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    table = "\n".join([*header, *rows]) + "\n"
    print(table)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + table)
    return 0


def _g(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f}"


if __name__ == "__main__":
    sys.exit(main())
