"""The production side of a kernelwright kernel: the runtime guard (shadow checks against the
PyTorch reference, fallback, canary, logs and counters).

Imports torch, triton and kernelwright's sealed evaluator modules (the tolerance table and the
comparison of sandbox/judge/compare.py, their one home), never the agent stack:

    from kernelwright.runtime import guard
    model = guard(Model(*init), ModelNew(*init), shadow_rate=0.01)

May import: `decisions.py` (the canary's rule), `sandbox/` (the comparison, tolerances, the
task loader); never the agent stack (`agents/`, `run/`, `graph.py`, `commands/`).
"""

from __future__ import annotations

from .canary import CanaryPolicy, Decision
from .envelope import Envelope, TensorSpec, ValueSpec
from .guard import COUNTERS, Guard, GuardMismatch, guard

__all__ = [
    "COUNTERS",
    "CanaryPolicy",
    "Decision",
    "Envelope",
    "Guard",
    "GuardMismatch",
    "TensorSpec",
    "ValueSpec",
    "guard",
]
