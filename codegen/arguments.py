"""The task's constructor arguments that are not sizes: read at run time, or checked.

fx bakes a plain Python attribute into the graph: `x * self.scaling_factor` traces as
`x * 2.0`, so a candidate generated for `Model(..., scaling_factor=2.0)` computes `* 2.0` for
`ModelNew(..., scaling_factor=3.0)` too. The evaluator's "other shape" variants move the task's
size constants, never a float, a flag or an axis, so nothing would catch that.

The codegen therefore builds the model a second time with these arguments moved (floats
scaled, ints one up, flags flipped); `symbolic.bind_constants` then reads every constant that
moved with an attribute from that attribute at run time. An argument it cannot bind (used
in a way that changes the graph, or through a value no attribute holds) stays a constant of the
kernels, and ModelNew's __init__ refuses any other value for it with a clear error: a candidate
may specialise on a constructor argument, never silently.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ..sandbox.task import Size, Task, task_namespace
from .pysrc import literal


@dataclass(frozen=True)
class Argument:
    """One positional argument of get_init_inputs(): its index, parameter name and value."""

    index: int
    name: str
    value: bool | int | float


def fixed_arguments(task: Task, ns: dict[str, Any]) -> list[Argument]:
    """The scalar arguments of `Model(*get_init_inputs())` that do not follow a size constant.

    An argument follows one when it changes with every size constant moved: those are the
    evaluator's business (it runs the candidate at other sizes). Empty when the arguments
    cannot be named (Model.__init__ takes *args) or the task does not load with moved sizes.
    """
    try:
        init = list(ns["get_init_inputs"]())
        params = list(inspect.signature(ns["Model"].__init__).parameters.values())[1:]
    except Exception:  # a task that does not say: nothing is checked
        return []
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return []
    if len(init) > len(params):
        return []
    try:
        bumped = list(task_namespace(task, _bumped(task.sizes))["get_init_inputs"]())
    except Exception:
        bumped = None
    if bumped is None or len(bumped) != len(init):
        return []
    out = []
    for i, (value, other) in enumerate(zip(init, bumped)):
        if isinstance(value, (bool, int, float)) and _same(value, other):
            out.append(Argument(i, params[i].name, value))
    return out


def moved(ns: dict[str, Any], args: list[Argument]) -> dict[str, Any]:
    """`ns` with get_init_inputs() returning `args` moved to other values."""
    original = ns["get_init_inputs"]
    values = {a.index: _other(a.value) for a in args}

    def get_init_inputs():
        return [values.get(i, v) for i, v in enumerate(original())]

    return {**ns, "get_init_inputs": get_init_inputs}


def check_lines(args: list[Argument], indent: str = "        ") -> list[str]:
    """Lines for the end of ModelNew.__init__ refusing other values of `args`."""
    if not args:
        return []
    lines = [
        "# The kernels take these constructor arguments as constants (they could not be read",
        "# at run time): another value would compute something else, so it is refused.",
        "for name, given, generated in (",
        *[f"    ({literal(a.name)}, {a.name}, {literal(a.value)})," for a in args],
        "):",
        "    if given != generated:",
        "        raise ValueError(",
        '            f"ModelNew was generated for {name}={generated!r}, not {given!r}: its "',
        '            "kernels take it as a constant; generate a candidate for this value"',
        "        )",
    ]
    return [indent + line for line in lines]


def _bumped(sizes: dict[str, Size]) -> dict[str, Size]:
    return {
        k: v + 1 if isinstance(v, int) else tuple(x + 1 for x in v)  # type: ignore[misc]
        for k, v in sizes.items()
    }


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _other(value: bool | int | float) -> bool | int | float:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    # Exact in binary, and unlikely to meet another constant of the task by chance.
    return value * 1.3125 + 0.0625
