"""A canary kernel version inside the runtime guard: its thresholds, its tallies, and the record
of each promote/rollback decision (the rule itself is decisions.canary_decision)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from torch import nn

from ..decisions import canary_decision
from .latency import LatencyLog


@dataclass(frozen=True)
class CanaryPolicy:
    """When a canary is promoted or rolled back.

    min_calls: canary calls (and as many timed calls of the current kernel) before a promotion;
    100 medians of CUDA-event times are stable to a few percent on a quiet GPU.
    max_faults: mismatches, NaN/Inf and exceptions tolerated (0: the first one rolls it back).
    max_latency_ratio: the canary's median device time over the current kernel's must not
    exceed this (1.0: no slower; 1.05 accepts 5% noise for a fix that is not meant to be faster).
    auto: decide after each canary call as soon as the thresholds say so; False leaves it to
    promote() and rollback().
    """

    min_calls: int = 100
    max_faults: int = 0
    max_latency_ratio: float = 1.0
    auto: bool = True


@dataclass(frozen=True)
class Decision:
    """One promote or rollback, as recorded in Guard.decisions and logged."""

    action: str  # "promote" | "rollback"
    version: str  # the canary's
    from_version: str  # the kernel it was measured against
    reason: str
    time: float
    calls: int
    faults: int
    canary_p50_s: float | None
    control_p50_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Canary:
    """The canary's module and tallies; mutated under the guard's lock."""

    module: nn.Module
    fraction: float
    version: str
    calls: int = 0
    faults: int = 0
    timed: LatencyLog = field(default_factory=LatencyLog)
    control: LatencyLog = field(default_factory=LatencyLog)

    def record(self, seconds: float | None, fault: bool) -> None:
        self.calls += 1
        self.faults += fault
        if seconds is not None and not fault:
            self.timed.add(seconds)

    def decide(self, policy: CanaryPolicy) -> tuple[str, str]:
        timed = min(self.timed.count, self.control.count)
        # The medians sort up to 2 x 4096 samples: only once they can decide something.
        ready = timed >= policy.min_calls and self.faults <= policy.max_faults
        return canary_decision(
            calls=self.calls,
            faults=self.faults,
            canary_s=self.timed.percentile(50) if ready else None,
            control_s=self.control.percentile(50) if ready else None,
            timed=timed,
            min_calls=policy.min_calls,
            max_faults=policy.max_faults,
            max_latency_ratio=policy.max_latency_ratio,
        )

    def decision(self, action: str, reason: str, from_version: str) -> Decision:
        return Decision(
            action=action,
            version=self.version,
            from_version=from_version,
            reason=reason,
            time=time.time(),
            calls=self.calls,
            faults=self.faults,
            canary_p50_s=self.timed.percentile(50),
            control_p50_s=self.control.percentile(50),
        )

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "fraction": self.fraction,
            "calls": self.calls,
            "faults": self.faults,
            "latency": self.timed.summary(),
            "control_latency": self.control.summary(),
        }
