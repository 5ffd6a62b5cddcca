"""The offline coder's one error: a task it writes no candidate for, and why."""

from __future__ import annotations

from ..errors import KernelwrightError


class Unsupported(KernelwrightError):
    """The model has no offline candidate; the message says why, in one line."""

    fault = "task"
    lineno: int | None = None  # the task's line that stopped the tracer (trace.py), if known
