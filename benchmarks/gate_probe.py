"""Two judges on one GPU against one alone, with what each judge took out (issue 30).

tests/test_gpugate.py's GPU test asserts the two agree within 5%; on the H200 (2026-12-05) a
judge beside another measured 0.0497 ms a call against 0.0376 alone. This prints each verdict's
time, its raw rounds, its wall's share and the judge's parts of a round, so the difference can
be placed (the wall's share, the candidate's own part, or the copy).

Run on a GPU machine: python3 benchmarks/gate_probe.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def show(label: str, results) -> None:
    for r in results:
        t = r.timings.candidate if r.timings else None
        note = r.timings.note if r.timings else ""
        share = re.search(r"the wall's share ([0-9.]+) ms", note)
        parts = re.findall(
            r"median parts: inputs ([0-9.]+) ms, its process ([0-9.]+) ms, "
            r"output copy ([0-9.]+) ms",
            note,
        )
        print(
            f"{label}: {r.status} {t.median_ms if t else float('nan'):.4f} ms a call, "
            f"share {share.group(1) if share else '-'}, parts (ref, cand) {parts}, "
            f"phases {r.phases_s}",
            flush=True,
        )


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("gate_probe: needs a CUDA GPU")
        return 0
    from test_zoo import AFFINE, HONEST_AFFINE

    from kernelwright.sandbox import EvalConfig, EvalPool

    config = EvalConfig(compile_baseline=False)
    with EvalPool(workers=1) as pool:
        show("alone", [pool.submit(AFFINE, HONEST_AFFINE, config).result() for _ in range(3)])
    with EvalPool(workers=2) as pool:
        futures = [pool.submit(AFFINE, HONEST_AFFINE, config) for _ in range(6)]
        show("beside", [f.result() for f in futures])
    with EvalPool(workers=1) as pool:
        show("alone again", [pool.submit(AFFINE, HONEST_AFFINE, config).result() for _ in range(2)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
