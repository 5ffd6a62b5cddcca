"""The task loader: a KernelBench task file, its size constants, its reference and inputs.

One module per responsibility: parse.py reads a task and its size constants and executes it at
its sizes; probe.py measures a task at some sizes on the meta device; vary.py gives the "other
shape" sizes; shrink.py the sizes that fit the CPU interpreter's budget; build.py builds the
reference and its inputs. metashapes.py gives recurrent modules' outputs on meta tensors. This
face hands on their public names (`from kernelwright.sandbox.task import load_task`).

May import: the sandbox's shared words (`contract.py`, `errors.py`) and `static/pyparse.py`.
Never judge/ or candidate/ (the candidate's process loads tasks too: tests/test_sandbox_layout.py).
"""

from __future__ import annotations

from .build import (
    CONSTANT_SPREAD,
    DTYPES,
    ZERO_SPREAD,
    as_dtype,
    build_inputs,
    build_reference,
    load_parameters,
    redraw_,
    seeded,
)
from .parse import (
    AXIS_NAMES,
    AXIS_SUFFIXES,
    MAX_AXIS,
    MIN_SIZE,
    REQUIRED_NAMES,
    Size,
    Slot,
    Task,
    TaskError,
    checked_overrides,
    load_task,
    parse_size,
    task_namespace,
)
from .probe import input_bytes
from .shrink import KEEP_SMALL, shrink_overrides
from .vary import (
    MAX_VARIANT_SHRINK_ROUNDS,
    RATIO,
    SMALL_SIZE,
    structural_constants,
    variant_note,
    variant_overrides,
)

__all__ = [
    "AXIS_NAMES",
    "AXIS_SUFFIXES",
    "CONSTANT_SPREAD",
    "DTYPES",
    "KEEP_SMALL",
    "MAX_AXIS",
    "MAX_VARIANT_SHRINK_ROUNDS",
    "MIN_SIZE",
    "RATIO",
    "REQUIRED_NAMES",
    "SMALL_SIZE",
    "ZERO_SPREAD",
    "Size",
    "Slot",
    "Task",
    "TaskError",
    "as_dtype",
    "build_inputs",
    "build_reference",
    "checked_overrides",
    "input_bytes",
    "load_parameters",
    "load_task",
    "parse_size",
    "redraw_",
    "seeded",
    "shrink_overrides",
    "structural_constants",
    "task_namespace",
    "variant_note",
    "variant_overrides",
]
