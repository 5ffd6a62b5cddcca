"""The judge v3 on real tasks: one offline candidate per task, its verdict, times, phases, memory.

Run on a CUDA machine:  python benchmarks/judge_bench.py TASK.py... [--results RESULTS.md]
For each task the offline coder's candidate (the fusion codegen) is evaluated at the task's own
sizes with every layer on (bubblewrap and seccomp where they run, the arena, the judge's clock).
The table gives the verdict, eager / torch.compile / candidate per call by the judge's clock,
the speedup over the faster baseline, the evaluation's wall time and its slowest phases, and the
candidate's device memory as the judge measured it beside the reference's peak (issue 30).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

GIB = 2**30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--results", type=Path, default=None, help="append the table here")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--no-compile", action="store_true", help="no torch.compile baseline")
    parser.add_argument("--budget-s", type=float, default=1e9, help="stop starting tasks after")
    args = parser.parse_args()

    import torch
    import triton

    from kernelwright.codegen import generate
    from kernelwright.sandbox import EvalConfig, EvalPool

    config = EvalConfig(dtype=args.dtype, compile_baseline=not args.no_compile)
    header = (
        "| task | verdict | eager ms | compile ms | candidate ms | speedup | wall s | "
        "slowest phases | cand. peak GiB | ref. peak GiB |"
    )
    rows = [header, "|" + "---|" * 10]
    started = time.monotonic()
    with EvalPool(workers=1) as pool:
        for path in args.tasks:
            if time.monotonic() - started > args.budget_s:
                rows.append(f"| {path.stem} | not run (budget) | | | | | | | | |")
                continue
            try:
                fused = generate(str(path), dtype=args.dtype)
            except Exception as e:  # a task the codegen cannot read
                rows.append(f"| {path.stem} | codegen: {str(e)[:50]} | | | | | | | | |")
                continue
            if fused.source is None:
                rows.append(f"| {path.stem} | no offline candidate | | | | | | | | |")
                continue
            r = pool.submit(str(path), fused.source, config).result()
            t = r.timings
            eager = t.eager.median_ms if t and t.eager else None
            comp = t.compiled.median_ms if t and t.compiled else None
            cand = t.candidate.median_ms if t and t.candidate else None
            best = min(x for x in (eager, comp) if x) if (eager or comp) else None
            speed = f"{best / cand:.2f}x" if best and cand else ""
            phases = sorted((r.phases_s or {}).items(), key=lambda kv: -kv[1])[:3]
            m = r.memory
            verdict = r.status + (f" [{r.rule}]" if r.rule else "")
            rows.append(
                f"| {path.stem} | {verdict} | {_f(eager)} | {_f(comp)} | {_f(cand)} | {speed} | "
                f"{r.wall_s:.1f} | {', '.join(f'{k} {v:.1f}' for k, v in phases)} | "
                f"{_g(m.candidate_peak_bytes if m else None)} | "
                f"{_g(m.reference_peak_bytes if m else None)} |"
            )
            if r.status == "ok" and torch.cuda.is_available():
                mine = _in_process(path, fused.source, args.dtype)
                rows[-1] += (
                    f" in-process (do_bench): eager {_f(mine[0])}, candidate {_f(mine[1])} |"
                )
            print(rows[-1], flush=True)
            if t is not None and t.note:
                print("    clock:", t.note, flush=True)
            if r.status != "ok":
                print("   ", (r.message or "")[:600].replace("\n", " "), flush=True)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    title = (
        f"\n### judge_bench, {datetime.date.today()}, {gpu}, torch {torch.__version__}, "
        f"triton {triton.__version__}, {args.dtype}\n"
    )
    table = title + "\n".join(rows) + "\n"
    print(table)
    if args.results:
        with open(args.results, "a") as f:
            f.write(table)
    return 0


def _in_process(path: Path, source: str, dtype: str) -> tuple[float | None, float | None]:
    """Eager and the candidate timed the old way, in this process with triton's do_bench on one
    input set (no wall, no arena): what the judge's clock is compared with."""
    import importlib.util
    import tempfile

    import torch
    import triton

    from kernelwright.sandbox.contract import torch_dtypes
    from kernelwright.sandbox.task import (
        build_inputs,
        build_reference,
        load_parameters,
        load_task,
        task_namespace,
    )

    try:
        from kernelwright.sandbox.candidate.process import set_precision

        set_precision("strict")  # the judge's flags (TF32 off), as in the candidate's process
        dt = torch_dtypes()[dtype]
        ns = task_namespace(load_task(str(path)), {})
        ref = build_reference(ns, dt, torch.device("cuda"), 1)
        inputs = build_inputs(ns, dt, torch.device("cuda"), 2)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location("kw_bench_candidate", f.name)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        torch.manual_seed(1)
        model = mod.ModelNew(*ns["get_init_inputs"]()).cuda().to(dt).train(ref.training)
        named = [*ref.named_parameters(), *ref.named_buffers()]
        load_parameters([(n, t.detach()) for n, t in named], model)
        with torch.no_grad():
            eager = triton.testing.do_bench(lambda: ref(*inputs), return_mode="median")
            cand = triton.testing.do_bench(lambda: model(*inputs), return_mode="median")
            # One call between two synchronizes by the host clock, as a judge's round has it.
            print(
                f"    in-process, host clock (1 call, synchronized): eager "
                f"{_host_ms(torch, lambda: ref(*inputs)):.4f}, candidate "
                f"{_host_ms(torch, lambda: model(*inputs)):.4f}",
                flush=True,
            )
        return eager, cand
    except Exception as e:  # the comparison is information, never the verdict
        print("    in-process timing failed:", str(e)[:200])
        return None, None


def _host_ms(torch, fn, reps: int = 15) -> float:
    import statistics
    import time

    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        started = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times[3:])


def _f(ms: float | None) -> str:
    return f"{ms:.4f}" if ms is not None else ""


def _g(b: int | None) -> str:
    return f"{b / GIB:.2f}" if b is not None else ""


if __name__ == "__main__":
    sys.exit(main())
