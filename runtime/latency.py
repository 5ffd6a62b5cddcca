"""Latency figures of the runtime guard: a bounded window of samples for p50/p99, cumulative
histogram buckets for Prometheus, and the device timer of sampled calls (CUDA events on a GPU,
perf_counter elsewhere)."""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

# Bucket upper bounds in seconds, 5 us .. 10 s: a small fused kernel's launch is ~5-20 us on the
# host, a large GEMM's device time tens of ms.
BUCKETS: tuple[float, ...] = (
    5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
# Percentiles over the latest WINDOW samples: recent behaviour, bounded memory (32 KiB).
WINDOW = 4096


class LatencyLog:
    """Samples of one path. Not locked: the guard calls `add` under its own lock."""

    def __init__(self) -> None:
        self.window: deque[float] = deque(maxlen=WINDOW)
        self.buckets = [0] * (len(BUCKETS) + 1)  # the last one is +Inf
        self.count = 0
        self.sum = 0.0

    def add(self, seconds: float) -> None:
        self.window.append(seconds)
        self.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.count += 1
        self.sum += seconds

    def extend(self, samples: list[float]) -> None:
        """add() of each sample, in bulk: the samples sorted once, each bucket's count is the
        difference of two bisections of them (no Python-level step per sample)."""
        self.window.extend(samples)
        ordered = sorted(samples)
        buckets, below = self.buckets, 0
        for i, bound in enumerate(BUCKETS):  # add() puts x in bucket bisect_left(BUCKETS, x)
            upto = bisect.bisect_right(ordered, bound, below)
            buckets[i] += upto - below
            below = upto
        buckets[-1] += len(ordered) - below
        self.count += len(samples)
        self.sum += sum(samples)

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0..100) of the window, nearest rank; None without samples."""
        if not self.window:
            return None
        ordered = sorted(self.window)
        return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]

    def summary(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "p50_s": self.percentile(50),
            "p99_s": self.percentile(99),
            "mean_s": self.sum / self.count if self.count else None,
        }

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, count) pairs as a Prometheus histogram states them."""
        total, out = 0, []
        for bound, n in zip([*map(str, BUCKETS), "+Inf"], self.buckets):
            total += n
            out.append((bound, total))
        return out


def device_of(args: tuple, kwargs: dict) -> torch.device | None:
    """The device of the first tensor among a call's inputs."""
    for x in (*args, *kwargs.values()):
        if isinstance(x, torch.Tensor):
            return x.device
    return None


@contextmanager
def device_time(device: torch.device | None) -> Iterator[list[float]]:
    """Seconds the block took on `device`: CUDA events on the current stream (the end event is
    waited for, one synchronisation: sampled calls only), perf_counter on the host otherwise.
    The figure is appended to the yielded list when the block finishes without raising."""
    box: list[float] = []
    if device is not None and device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        yield box
        end.record()
        end.synchronize()
        box.append(start.elapsed_time(end) / 1e3)
        return
    t0 = time.perf_counter()
    yield box
    box.append(time.perf_counter() - t0)
