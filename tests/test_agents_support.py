"""Fakes shared by the agent and graph tests: a scripted evaluator pool and a RunContext on it.

(No tests here; the real evaluator is exercised end to end in test_optimize.py.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kernelwright.agents.context import RunContext, llm_configs
from kernelwright.agents.llm import ResponseCache
from kernelwright.run.config import RunConfig, eval_config_for
from kernelwright.run.rundir import RunDir
from kernelwright.sandbox.results import Baseline, EvalResult, Timing, Timings
from kernelwright.sandbox.task import load_task

TASKS = Path(__file__).parent / "tasks"
EXAMPLES = Path(__file__).parent.parent / "prompts" / "examples"


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p25_ms=ms, p75_ms=ms, min_ms=ms, max_ms=ms, reps=10)


def ok_result(median_ms: float | None = None, eager_ms: float = 1.0) -> EvalResult:
    """A verified result; with median_ms, meaningful timings and a speedup over eager."""
    if median_ms is None:
        return EvalResult(status="ok", timings=Timings(meaningful=False, note="interpreter"))
    timings = Timings(meaningful=True, candidate=timing(median_ms), eager=timing(eager_ms))
    return EvalResult(status="ok", timings=timings, speedup_eager=eager_ms / median_ms)


class FakePool:
    """EvalPool's interface with verdicts from a function of the source; records every call."""

    def __init__(self, verdict: Callable[[str], EvalResult] | None = None) -> None:
        self.verdict = verdict or (lambda source: ok_result())
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def submit(self, task: Any, source: str, config: Any = None) -> Future:
        with self._lock:
            self.calls.append(source)
        future: Future = Future()
        try:
            future.set_result(self.verdict(source))
        except Exception as e:  # the test's verdict decides to fail this submission
            future.set_exception(e)
        return future

    def submit_baseline(self, task: Any, config: Any = None) -> Future:
        future: Future = Future()
        future.set_result(Baseline(status="ok", timings=Timings(meaningful=False)))
        return future

    def close(self) -> None:
        pass


def make_context(
    tmp_path: Path,
    pool: FakePool,
    config: RunConfig | None = None,
    *,
    task: str = "gelu",
    interpreter: bool = True,
) -> RunContext:
    """A RunContext on the fake pool; LLM roles follow the environment (fake_openai sets it)."""
    config = config or RunConfig(model="offline")
    rundir = RunDir(tmp_path / "run")
    rundir.path.mkdir(parents=True, exist_ok=True)
    llm = llm_configs(config)
    online = [c for c in llm.values() if not c.offline]
    return RunContext(
        config=config,
        task=load_task(TASKS / f"{task}.py"),
        eval_config=eval_config_for(config),
        pool=pool,  # type: ignore[arg-type]
        rundir=rundir,
        llm=llm,
        interpreter=interpreter,
        cache=ResponseCache(online[0].cache_path) if online else None,
    )
