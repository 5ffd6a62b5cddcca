"""The reference forward's time per aten op, from torch.profiler: the planner's map of where a
task spends its time (Baseline.ops). Run by the judge (worker.py) with the gate exclusive, on
the judge's own reference: no candidate code is involved."""

from __future__ import annotations

from typing import Any

from ..results import OpTime
from .shape import TaskContext
from .verdict import _one_line


def op_breakdown(
    torch: Any, ctx: TaskContext, device: Any, seed: int, calls: int = 3
) -> tuple[tuple[OpTime, ...], str]:
    """Self time per aten op of the reference forward, from torch.profiler, top 12."""
    from torch.profiler import ProfilerActivity, profile

    from ..task import build_inputs

    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    inputs = build_inputs(ctx.main.ns, ctx.dtype, device, seed)
    try:
        with torch.no_grad():
            ctx.main.ref(*inputs)  # warm: first calls pay for lazy initialisation
            with profile(activities=activities) as prof:
                for _ in range(calls):
                    ctx.main.ref(*inputs)
                if cuda:
                    torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            if not e.key.startswith("aten::"):
                continue
            if cuda:
                us: Any = getattr(e, "self_device_time_total", None)
                us = getattr(e, "self_cuda_time_total", 0) if us is None else us
            else:
                us = e.self_cpu_time_total
            if us > 0:
                rows.append((e.key, e.count, us))
    except Exception as e:  # a profiler that does not work here must not fail the baseline
        return (), f"no op breakdown: torch.profiler failed ({_one_line(e)})"
    total = sum(us for _, _, us in rows) or 1.0
    rows.sort(key=lambda r: -r[2])
    ops = tuple(
        OpTime(name, max(1, count // calls), us / calls / 1000, us / total)
        for name, count, us in rows[:12]
    )
    where = "device" if cuda else "CPU (op mix only: the GPU will differ)"
    return ops, f"torch.profiler self {where} time over {calls} forward calls"
