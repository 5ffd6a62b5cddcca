"""Load a KernelBench-format task for tracing: its source, size constants and executed namespace.

Goes through kernelwright.sandbox.task when it exists, so that the codegen sees exactly what the
evaluator sees; otherwise executes the file itself with module-level int constants overridden.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...sandbox.pyparse import compile_tree, parse


@dataclass(frozen=True)
class TaskSource:
    """What the codegen needs of a task: where it is, its text and its int size constants."""

    path: str
    source: str
    constants: dict[str, int]
    task: Any  # the sandbox Task when the sandbox is there, else None


def task_source(task: Any) -> TaskSource:
    """A TaskSource for a sandbox Task or a path."""
    if not isinstance(task, (str, Path)):
        return TaskSource(str(task.path), task.source, dict(task.constants), task)
    sandbox_task = _sandbox_task_module()
    if sandbox_task is not None:
        loaded = sandbox_task.load_task(str(task))
        return TaskSource(str(loaded.path), loaded.source, dict(loaded.constants), loaded)
    path = Path(task)
    source = path.read_text()
    return TaskSource(str(path), source, int_constants(source), None)


def namespace(ts: TaskSource, overrides: dict[str, int] | None = None) -> dict[str, Any]:
    """The task module executed with `overrides` applied to its size constants."""
    sandbox_task = _sandbox_task_module()
    if sandbox_task is not None and ts.task is not None:
        return sandbox_task.task_namespace(ts.task, overrides or {})
    tree = parse(ts.source, filename=ts.path)
    for stmt in tree.body:
        name = _int_assignment(stmt)
        if name is not None and overrides and name in overrides:
            stmt.value = ast.Constant(int(overrides[name]))
    ns: dict[str, Any] = {"__name__": "kernelwright_task", "__file__": ts.path}
    exec(compile_tree(tree, ts.path), ns)
    return ns


def int_constants(source: str) -> dict[str, int]:
    """Module-level `NAME = <int>` assignments: the task's size constants and their defaults."""
    out = {}
    for stmt in parse(source).body:
        name = _int_assignment(stmt)
        if name is not None:
            out[name] = stmt.value.value
    return out


def _int_assignment(stmt: ast.stmt) -> str | None:
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Constant)
        and type(stmt.value.value) is int
    ):
        return stmt.targets[0].id
    return None


def _sandbox_task_module() -> Any:
    """kernelwright.sandbox.task, or None while it is not written yet."""
    try:
        from ...sandbox import task as sandbox_task
    except ImportError:
        return None
    return sandbox_task
