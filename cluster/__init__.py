"""Where candidates are evaluated: the local EvalPool, or a Ray cluster (`--executor ray`).

Both satisfy `Evaluator`, so the graph, the tester, suite and nightly do not care which they
got. `ray` is imported only when the Ray executor is opened: `--help` and the local path never
load it.

May import: `sandbox/` only (and `ray` inside ray_pool.py); nothing of the run or agents above.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from ..sandbox.config import EvalConfig
from ..sandbox.errors import KernelwrightError
from ..sandbox.judge.pool import EvalPool
from ..sandbox.results import Environment, EvalResult

EXECUTORS = ("local", "ray")
RAY_MISSING = (
    "--executor ray needs Ray, which is not installed: pip install 'kernelwright[ray]' "
    "(on every node of the cluster)"
)


class Evaluator(Protocol):
    """What the graph, tester, suite and nightly need of an evaluator (EvalPool's interface)."""

    def submit(self, task: Any, source: str, config: EvalConfig | None = None) -> Future: ...

    def submit_baseline(self, task: Any, config: EvalConfig | None = None) -> Future: ...

    def describe(self, task: Any = None) -> Environment: ...

    def map(
        self, task: Any, sources: list[str], config: EvalConfig | None = None
    ) -> list[EvalResult]: ...

    def close(self, cancel: bool = False) -> None: ...

    def cancel(self) -> None: ...

    @property
    def closed(self) -> bool: ...

    def __enter__(self) -> Evaluator: ...

    def __exit__(self, exc_type: Any, *exc: Any) -> None: ...


class ExecutorSettings(Protocol):
    """The RunConfig fields an evaluator is opened from (run/ is above this floor)."""

    @property
    def executor(self) -> str: ...

    @property
    def ray_address(self) -> str | None: ...

    @property
    def max_retries(self) -> int: ...

    @property
    def workers(self) -> int | None: ...

    @property
    def devices(self) -> tuple[str, ...]: ...


class ExecutorError(KernelwrightError):
    """An executor that cannot start (Ray missing, no cluster at the address): one line."""

    fault = "configuration"


def open_evaluator(settings: ExecutorSettings, devices: Sequence[str] | None = None) -> Evaluator:
    """The evaluator `settings.executor` names: an EvalPool on `devices` (default: the
    settings', else every GPU or core), or a RayPool on the cluster."""
    if settings.executor == "ray":
        try:
            from .ray_pool import RayPool
        except ImportError as e:
            if e.name == "ray" or (e.name or "").startswith("ray."):
                raise ExecutorError(RAY_MISSING) from None
            raise
        return RayPool(
            address=settings.ray_address,
            max_retries=settings.max_retries,
            actors=settings.workers,
        )
    if settings.executor != "local":
        raise ExecutorError(
            f"unknown executor {settings.executor!r}: one of {', '.join(EXECUTORS)}"
        )
    chosen = list(devices or settings.devices) or None
    return EvalPool(settings.workers, devices=chosen)


__all__ = ["EXECUTORS", "Evaluator", "ExecutorError", "ExecutorSettings", "open_evaluator"]
