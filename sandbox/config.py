"""EvalConfig: every knob of one evaluation, in one frozen, JSON-friendly object."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .contract import DType, PrecisionPolicy


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """kernelwright's cache (measured device ceilings, LLM replies): $KERNELWRIGHT_CACHE_DIR,
    else ~/.cache/kernelwright, read from `env` (default: this process's environment)."""
    env = os.environ if env is None else env
    root = env.get("KERNELWRIGHT_CACHE_DIR")
    if root:
        return Path(root).expanduser()
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".cache" / "kernelwright"


@dataclass(frozen=True)
class EvalConfig:
    """How to judge a candidate. Defaults are what a user gets from `kernelwright eval`."""

    dtype: DType = "fp32"
    # Size constants of the task to override before get_inputs/get_init_inputs run (--shape N=V).
    shapes: dict[str, int] = field(default_factory=dict)
    # Correctness trials at the task's own shape, each with fresh seeds and fresh input tensors.
    trials: int = 3
    precision: PrecisionPolicy = "strict"
    # Also check one shape where every size constant differs (catches hard-coded sizes).
    check_variant: bool = True
    # Extra calls whose outputs are all checked (stateful drift), on top of the trials.
    drift_calls: int = 8
    # Calls whose outputs the candidate's process holds at once for the reuse check: a ring of
    # fewer persistent output buffers than this is found (fewer for outputs over 4 GiB / this).
    reuse_calls: int = 20
    # Timing (CUDA only): the judge's clock over rounds of calls, median of `reps` rounds.
    timing: bool = True
    warmup: int = 5
    reps: int = 50
    compile_baseline: bool = True
    cuda_graphs: bool = False
    l2_flush: bool = True
    # Limits of the sandboxed worker.
    timeout_s: float = 180.0  # wall clock for one candidate, compile included
    setup_timeout_s: float = 900.0  # reference, baselines and torch.compile of a new task
    cpu_time_s: float = 600.0  # CPU seconds for one candidate (RLIMIT_CPU)
    host_memory_gb: float = 16.0  # resident memory of the worker; above it the worker is killed
    # Also cap the candidate process's private writable memory at host_memory_gb (RLIMIT_DATA,
    # set before candidate code runs: an allocation past it fails, rule "memory"). Off only
    # where a CUDA driver reserves more than that; the judge's RSS polling holds either way.
    host_rlimit: bool = True
    gpu_memory_fraction: float = 0.9  # of the device, per worker (torch caching allocator cap)
    max_file_mb: int = 512  # RLIMIT_FSIZE: no file the worker writes may be larger
    # Device memory the candidate may peak at (GB); None: max(4x the reference's peak, the
    # reference's peak + 1 GiB). Above it: rejected, rule "memory" (--max-memory).
    max_memory_gb: float | None = None
    # Run the candidate process under bubblewrap and seccomp where they work. Off only for the
    # evaluator's own tests of the fallback; the result's isolation layers say what held.
    os_sandbox: bool = True
    # For the evaluator's own tests only: time with the host's clock on a machine without CUDA
    # (the interpreter), so that the judge's clock check can be exercised. Times mean nothing.
    host_clock_for_tests: bool = False
    # For the evaluator's own tests only: skip the AST checks so that the runtime layers
    # (audit hook, environment, rlimits) can be shown to hold on their own. Never in a real run.
    unsafe_skip_static_checks: bool = False

    def replace(self, **changes: Any) -> EvalConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown EvalConfig fields: {sorted(unknown)}")
        return cls(**data)

    def cache_key(self) -> dict[str, Any]:
        """The fields that change a verdict (not the limits): part of the result-cache key."""
        d = self.to_dict()
        limits = ("timeout_s", "setup_timeout_s", "cpu_time_s", "host_memory_gb", "max_file_mb")
        for k in (*limits, "host_rlimit"):
            d.pop(k)
        return d
