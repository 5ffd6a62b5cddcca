"""KernelwrightError: the root of every exception kernelwright raises, with whose fault it is.

Here, in sandbox/, because sandbox/ is sealed (it imports nothing of kernelwright outside
itself) and its exceptions derive from the root too; the rest of the package imports it as
`kernelwright.errors`. The CLI maps the fault to its exit code (commands/common.py). Each class
keeps its older base too (ValueError, RuntimeError, ...), so an `except` of that still works.
"""

from __future__ import annotations

import typing
from typing import Literal

# Whose fault: the candidate's (a kernel that fails or cheats), the task's (its file or its
# reference), the evaluator's (kernelwright's own: a bug, a worker or device that failed), or
# the configuration's (what the user asked for: flags, variables, endpoints, paths, a store).
Fault = Literal["candidate", "task", "evaluator", "configuration"]
FAULTS: tuple[str, ...] = typing.get_args(Fault)


class KernelwrightError(Exception):
    """The root; `fault` says whose failure it is (a class attribute, or a property where the
    instance knows better: a verdict's status and rule)."""

    fault: Fault = "evaluator"
