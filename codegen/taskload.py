"""Load a KernelBench-format task for tracing: its source, size constants and executed namespace.

Everything goes through kernelwright.sandbox.task, so that the codegen sees exactly what the
evaluator sees: the same size constants (chained, annotated and tuple ones included), set the same
way (`--shape`, the interpreter's shrinking, the "other shape" variants).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sandbox import task as sandbox_task
from ..sandbox.task import Size, Task


@dataclass(frozen=True)
class TaskSource:
    """What the codegen needs of a task: where it is, its text and its size constants."""

    path: str
    source: str
    constants: dict[str, Size]
    task: Task


def task_source(task: Task | str | Path) -> TaskSource:
    """A TaskSource for a sandbox Task or a path (loaded as the evaluator loads it)."""
    loaded = task if isinstance(task, Task) else sandbox_task.load_task(task)
    return TaskSource(str(loaded.path), loaded.source, dict(loaded.constants), loaded)


def namespace(ts: TaskSource, overrides: dict[str, Size] | None = None) -> dict[str, Any]:
    """The task module executed with `overrides` applied to its size constants."""
    return sandbox_task.task_namespace(ts.task, overrides or {})


def _sandbox_task_module() -> Any:
    """kernelwright.sandbox.task (api.py reaches the variants through it)."""
    return sandbox_task
