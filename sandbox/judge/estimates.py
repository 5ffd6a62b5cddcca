"""The judge clock's estimates from its samples, pure functions of numbers: the wall's share of
a call, the lower quartile and spread of a calibration's rounds, and whether eager's or
torch.compile's rounds are possible at all (timed.py uses them)."""

from __future__ import annotations

import statistics
from typing import Any


def wall_share(through_ms: float, eager_ms: float, around_ms: float | None) -> float:
    """What each of the candidate's calls is relieved of, from the reference's rounds through
    the wall (before any candidate code was imported): the smaller of

    - its time per call through the wall less eager's in the judge's own process, and
    - the round less the reference process's own account of its n calls, per call (`around_ms`:
      the channel, the context switches, the judge's copy, and nothing of the calls).

    The first also takes out what the reference's own calls cost more in the sandboxed process
    than in the judge's (a launch there costs ~1.3x a plain process's on the H200), a cost per
    launch: a candidate with fewer launches than the reference would be credited with time it
    never spent. The second takes out only the round's wall. The smaller of the two is at most
    what the wall cost the reference's rounds, so the candidate's time is never less than its
    work's; what its own launches cost more in the sandbox stays in its time (against it).
    """
    share = max(0.0, through_ms - eager_ms)
    if around_ms is not None:
        share = min(share, max(0.0, around_ms))
    return share


def lower_quartile(samples: list[float]) -> float:
    """The first quartile of `samples` (the one sample of a list of one)."""
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=4, method="inclusive")[0]


def spread(samples: list[float]) -> float:
    """The interquartile range of `samples` over their median (0 for fewer than two; statistics'
    default quartiles, the wider ones of a few samples): the wall's calibration is kept and the
    candidate's rounds are settled by it."""
    if len(samples) < 2:
        return 0.0
    q1, median, q3 = statistics.quantiles(samples, n=4)
    return (q3 - q1) / median if median > 0 else float("inf")


def impossible_baseline(samples: dict[str, Any], bound_ms: float) -> str:
    """What is wrong with eager's and torch.compile's rounds (their medians per call) against
    the task's physical lower bound, or "" when both are possible."""
    from .roofline import is_impossible

    bad = [
        f"{name} {s.median_ms:.4f} ms"
        for name, s in samples.items()
        if s is not None and is_impossible(s.median_ms, bound_ms)
    ]
    return ", ".join(bad)
