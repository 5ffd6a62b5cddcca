"""The tasks of a suite or a night: task files given as they are, directories in KernelBench's
layout (level*/NN_*.py) or flat; each task's label, and which labels a --redo pattern names. And
what runs each task: an optimizer (graph.optimize, or a scripted one in tests), and how its
run shows its progress."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import KernelwrightError
from ..run.rundir import EventListener

# What runs one task: graph.optimize's signature (config, task path, then keywords), run.json back.
Optimize = Callable[..., dict[str, Any]]
# How a task's run shows its progress: a listener, given the prefix of its lines ('[gelu] ').
Progress = Callable[[str], EventListener]


class SuiteError(KernelwrightError):
    """A suite that cannot start (no task files where it was pointed): one line."""

    fault = "configuration"


def find_tasks(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Task files: given files as they are; a directory's level*/NN_*.py (KernelBench layout),
    else its *.py files. Order is kept, duplicates dropped."""
    found: list[Path] = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            files = sorted(p.glob("level*/[0-9]*_*.py")) or sorted(
                f for f in p.glob("*.py") if not f.name.startswith("_")
            )
            if not files:
                raise SuiteError(f"no task files in {p} (looked for level*/NN_*.py, then *.py)")
            found += files
        elif p.is_file():
            found.append(p)
        else:
            raise SuiteError(f"task {str(given)!r} does not exist")
    unique: dict[Path, None] = {}
    for f in found:
        unique.setdefault(f.resolve(), None)
    return list(unique)


def task_label(path: Path) -> str:
    """'level1/01_relu' for a file in a level directory, else the file's stem."""
    parent = path.parent.name
    return f"{parent}/{path.stem}" if parent.startswith("level") else path.stem


def matches(label: str, patterns: Sequence[str]) -> bool:
    """Whether a label (level1/36_cumsum_rows) matches one of these patterns (fnmatch globs)."""
    return any(fnmatch.fnmatchcase(label, pattern) for pattern in patterns)


def unmatched(patterns: Sequence[str], paths: Sequence[Path]) -> list[str]:
    """The patterns (`suite --redo`) that match none of these tasks' labels."""
    labels = [task_label(p) for p in paths]
    return [p for p in patterns if not any(fnmatch.fnmatchcase(label, p) for label in labels)]


def graph_optimizer() -> Optimize:
    """graph.optimize, what `kernelwright suite` and `nightly` run each task with; imported when
    the command starts (the agent stack and LangGraph load then, not with suites/)."""
    from ..graph import optimize

    return optimize
