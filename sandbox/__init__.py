"""The trusted evaluator: judges candidate Triton kernels in sandboxed worker processes.

Usable on its own, without the agent stack:

    from kernelwright.sandbox import evaluate, EvalConfig
    result = evaluate("task.py", open("candidate.py").read(), EvalConfig(dtype="fp16"))

May import: `judge/` (this face hands on its EvalPool) and the sandbox's own modules; sealed:
nothing of kernelwright outside sandbox/. Its subpackages say what each may import.
"""

from __future__ import annotations

import atexit
import threading

from .config import EvalConfig
from .judge.pool import EvalPool
from .results import Baseline, EvalResult

__all__ = ["Baseline", "EvalConfig", "EvalPool", "EvalResult", "baseline", "evaluate"]

_default_pool: EvalPool | None = None
_default_lock = threading.Lock()


def _pool() -> EvalPool:
    """A process-wide pool, started on first use, so repeated calls find warm workers.

    Started again when closed: a Ctrl-C in a suite run from Python cancels every open pool
    (`cancel_open_pools`), and evaluate() must keep working after it.
    """
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool.closed:
            _default_pool = EvalPool(workers=1)
            atexit.register(_default_pool.close)
        return _default_pool


def evaluate(
    task, candidate_source: str, config: EvalConfig | None = None, pool: EvalPool | None = None
) -> EvalResult:
    """Judge one candidate source against a task (a path or a Task). Always returns a result."""
    return (pool or _pool()).submit(task, candidate_source, config).result()


def baseline(task, config: EvalConfig | None = None, pool: EvalPool | None = None) -> Baseline:
    """Eager, torch.compile and roofline times of a task's reference on this machine."""
    return (pool or _pool()).submit_baseline(task, config).result()
