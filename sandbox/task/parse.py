"""Read a task file: its Model/get_inputs/get_init_inputs, its size constants, the overrides.

`load_task` checks a task and finds its size constants (the heuristic below); `task_namespace`
executes it with its sizes set; `checked_overrides` and `parse_size` read `--shape` values. The
slots of a task's sizes (`_slot_values`, `_with_slots`) are what vary.py and shrink.py move.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import itertools
import json
import operator
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import KernelwrightError
from ..static.pyparse import compile_tree, parse

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")

# -- the size-constant heuristic -------------------------------------------------------------------
# A size constant is a module-level name bound exactly once, to an int or to a tuple (or list) of
# ints written as literals: `N = 4096`, `N: int = 16 * 1024`, `height = width = 128` (15 of
# KernelBench's 100 level-2 tasks chain them), `h, w = 32, 32`, `kernel_size = (3, 5)`,
# `input_shape = (8192 * 2,)`. Its sizes are the ints that pass two filters:
# - values below 2 are flags, axes, strides and paddings of 1, not sizes: changing them changes
#   what the task computes rather than how big it is (the 1s of `stride = (2, 1)` stay);
# - an axis-like name (`dim`, `axes`, or ending in `_dim`/`_axis`, e.g. `reduce_dim = 2`) whose
#   values are all below 8 holds the axes a reduction runs over: no tensor in KernelBench has 8
#   dimensions, so `dim = 1` is an axis and `dim = 16384` is a size. So is a tuple that permutes
#   range(n) (`perm = (0, 2, 1)`).
# A constant with no size among its values is not one. Values written with other names
# (`dim = features * 2`, `groups = in_channels`, `bias_shape = (out_channels, 1, 1)`) are derived:
# they follow the constants they are computed from, which the variants and shrinking move, and
# `--shape` refuses them by name, pointing at those constants. `--shape` spells a tuple with
# commas: `--shape kernel_size=3,5` (or `(3,5)`; one value for a 1-tuple: `input_shape=4096`).
MIN_SIZE = 2
AXIS_NAMES = ("dim", "dims", "axis", "axes")
AXIS_SUFFIXES = ("_dim", "_dims", "_axis", "_axes")
MAX_AXIS = 8


# A size constant's value: an int, or a tuple of ints (the task may write it as a list).
Size = int | tuple[int, ...]
# One varying int of a task: (constant, element index), the index None for an int constant.
Slot = tuple[str, int | None]


class TaskError(KernelwrightError):
    """A task file or a size override that cannot be used; the message is one line for a user."""

    fault = "task"


@dataclass(frozen=True)
class Task:
    """A task file with its size constants (and their defaults) and the overrides asked for."""

    path: str
    name: str
    source: str
    constants: dict[str, Size] = field(default_factory=dict)
    overrides: dict[str, Size] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Tuples come back from JSON as lists (the pool's request to its worker), and an override
        # may be spelled the way it was typed ("3,5", 4096 for a 1-tuple): one canonical form, so
        # that `hash`, a cache key, is the same for the same sizes. Nothing is refused here
        # (checked_overrides does that).
        constants = {k: _canonical(v) for k, v in self.constants.items()}
        overrides = {k: _canonical(v, constants.get(k)) for k, v in self.overrides.items()}
        object.__setattr__(self, "constants", constants)
        object.__setattr__(self, "overrides", overrides)

    @property
    def sizes(self) -> dict[str, Size]:
        """The size constants with the overrides applied."""
        return {**self.constants, **self.overrides}

    @property
    def hash(self) -> str:
        """sha256 of the source and the sizes: identical text and sizes give identical hashes."""
        sizes = json.dumps(self.sizes, sort_keys=True)
        return hashlib.sha256(f"{self.source}\0{sizes}".encode()).hexdigest()

    def __hash__(self) -> int:
        return hash(self.hash)


def load_task(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Task:
    """The task at `path`, checked for Model/get_inputs/get_init_inputs; raises TaskError."""
    p = Path(path).expanduser()
    if not p.exists():
        raise TaskError(f"task file not found: {path}")
    if not p.is_file():
        raise TaskError(f"task path is not a file: {path}")
    try:
        source = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TaskError(f"{path}: not a UTF-8 text file ({e.reason})") from None
    except OSError as e:
        raise TaskError(f"{path}: cannot read the task file: {e.strerror}") from None
    tree = _parse(source, str(path))
    missing = [n for n in REQUIRED_NAMES if n not in _module_bindings(tree)]
    if missing:
        raise TaskError(
            f"{path}: no {', '.join(missing)} at module level; a KernelBench task defines "
            "class Model(nn.Module), get_inputs() and get_init_inputs()"
        )
    constants = {name: c.value for name, c in _size_constants(tree).items()}
    task = Task(path=str(p.resolve()), name=p.stem, source=source, constants=constants)
    return dataclasses.replace(task, overrides=checked_overrides(task, overrides or {}))


def checked_overrides(task: Task, overrides: Mapping[str, Any]) -> dict[str, Size]:
    """`overrides` checked against the size constants of `task`; raises TaskError.

    An int constant takes a positive int (or its text); a tuple constant a tuple of as many
    non-negative ints (`(3, 5)`, `[3, 5]`, "3,5", "(3, 5)"; an int for a 1-tuple). A derived name
    (`dim = features * 2`) is refused with the constants it follows.
    """
    checked = {}
    for name, value in overrides.items():
        if name not in task.constants:
            raise TaskError(_unknown_name(task, name))
        checked[name] = _size_value(name, value, task.constants[name])
    return checked


def parse_size(text: str) -> Size:
    """A --shape value: "64" -> 64; "3,5", "(3, 5)" or "[3,5]" -> (3, 5); "4096," -> (4096,).

    Raises ValueError for anything else (the range of each value is checked_overrides' job).
    """
    body = text.strip()
    bracketed = len(body) >= 2 and body[0] in "([" and body[-1] == {"(": ")", "[": "]"}[body[0]]
    if bracketed:
        body = body[1:-1]
    if "," not in body and not bracketed:
        return int(body)
    parts = [p.strip() for p in body.split(",")]
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()  # "4096,": a 1-tuple
    if "" in parts:
        raise ValueError(f"{text!r} is not an integer or a comma-separated list of integers")
    return tuple(int(p) for p in parts)


def task_namespace(task: Task, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The task module executed with its size constants set (task.sizes, then `overrides`).

    A constant set to another value gets an assignment of it right after the statement that binds
    it (`height = width = 128` then `height = 32`), so derived constants (`N = 2 * dim`) follow
    it and nothing else that statement does changes. The module gets a fresh namespace and a
    unique `__name__`; nothing is registered in sys.modules. Errors while executing it become
    TaskError with the task's line number.
    """
    sizes = {**task.sizes, **checked_overrides(task, overrides or {})}
    tree = _parse(task.source, task.path)
    _set_sizes(tree, sizes)
    code = compile_tree(ast.fix_missing_locations(tree), task.path, dont_inherit=True)
    name = f"kernelwright_task_{_identifier(task.name)}_{next(_module_ids)}"
    module = types.ModuleType(name)
    module.__file__ = task.path
    ns = module.__dict__
    try:
        exec(code, ns)
    except Exception as e:
        raise TaskError(f"{_where(e, task.path)}executing the task failed: {_one_line(e)}") from e
    missing = [n for n in REQUIRED_NAMES if n not in ns]
    if missing:
        raise TaskError(f"{task.path}: executing the task defined no {', '.join(missing)}")
    return ns


def _slot_values(task: Task, sizes: Mapping[str, Size]) -> dict[Slot, int]:
    """The varying ints of the task's size constants, at `sizes`."""
    out: dict[Slot, int] = {}
    for name, default in task.constants.items():
        value = sizes[name]
        for i in _size_slots(name, default):
            out[(name, i)] = value if i is None else value[i]  # type: ignore[assignment,index]  # i: a tuple's
    return out


def _with_slots(sizes: Mapping[str, Size], values: Mapping[Slot, int]) -> dict[str, Size]:
    """`sizes` with the slots in `values` set."""
    out = dict(sizes)
    for (name, i), v in values.items():
        if i is None:
            out[name] = v
        else:
            items = list(out[name])  # type: ignore[arg-type]  # a slot index: a tuple constant
            items[i] = v
            out[name] = tuple(items)
    return out


# -- parsing the task's size constants -------------------------------------------------------------

_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
}


def _parse(source: str, path: str) -> ast.Module:
    try:
        return parse(source, filename=path)
    except SyntaxError as e:
        raise TaskError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None


@dataclass(frozen=True)
class _Constant:
    """A size constant as the task file writes it."""

    value: Size
    kind: type  # int, tuple or list: what the task binds (a list stays a list)
    stmt: int  # index in the module body of the statement that binds it


def _size_constants(tree: ast.Module) -> dict[str, _Constant]:
    """The size constants of a task module (see the heuristic at the top of this file)."""
    counts = _binding_counts(tree)
    found = {}
    for i, stmt in enumerate(tree.body):
        for name, node in _bindings(stmt):
            literal = _literal(node)
            if literal is not None and counts[name] == 1 and _size_slots(name, literal[0]):
                found[name] = _Constant(literal[0], literal[1], i)
    return found


def _bindings(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, value node) of each name a module-level assignment binds to one value: `a = v`,
    `a: T = v`, every target of `a = b = v`, and the elements of `a, b = v1, v2`."""
    if isinstance(stmt, ast.AnnAssign):
        if stmt.value is not None and isinstance(stmt.target, ast.Name):
            return [(stmt.target.id, stmt.value)]
        return []
    if not isinstance(stmt, ast.Assign):
        return []
    value, out = stmt.value, []
    for target in stmt.targets:
        if isinstance(target, ast.Name):
            out.append((target.id, value))
        elif (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))
        ):
            out += [(t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)]
    return out


def _literal(node: ast.expr) -> tuple[Size, type] | None:
    """(value, kind) of an int expression of literals or a tuple/list of them, else None."""
    value = _int_value(node)
    if value is not None:
        return value, int
    if isinstance(node, (ast.Tuple, ast.List)) and node.elts:
        items = [_int_value(e) for e in node.elts]
        if all(v is not None for v in items):
            return tuple(items), (tuple if isinstance(node, ast.Tuple) else list)  # type: ignore[arg-type]  # no None
    return None


def _size_slots(name: str, value: Size) -> tuple[int | None, ...]:
    """The positions of `value` that are sizes: (None,) for an int that is one, the indices of
    the sizes of a tuple, () when there are none (see the heuristic at the top of this file)."""
    lower = name.lower()
    axis_like = lower in AXIS_NAMES or lower.endswith(AXIS_SUFFIXES)
    values = (value,) if isinstance(value, int) else value
    if axis_like and all(v < MAX_AXIS for v in values):
        return ()
    if isinstance(value, int):
        return (None,) if value >= MIN_SIZE else ()
    if len(value) > 1 and sorted(value) == list(range(len(value))):  # a permutation of axes
        return ()
    return tuple(i for i, v in enumerate(value) if v >= MIN_SIZE)


def _set_sizes(tree: ast.Module, sizes: Mapping[str, Size]) -> None:
    """Give every constant whose value in `sizes` differs from the task's an assignment of it
    right after the statement that binds it."""
    constants = _size_constants(tree)
    after: dict[int, list[ast.stmt]] = {}
    for name, value in sizes.items():
        c = constants.get(name)
        if c is None or value == c.value:
            continue
        stmt = tree.body[c.stmt]
        assign = ast.Assign(targets=[ast.Name(name, ast.Store())], value=_literal_node(value, c))
        after.setdefault(c.stmt, []).append(ast.copy_location(assign, stmt))
    if after:
        tree.body = [s for i, stmt in enumerate(tree.body) for s in (stmt, *after.get(i, ()))]


def _literal_node(value: Size, c: _Constant) -> ast.expr:
    if c.kind is int:
        return ast.Constant(value)  # type: ignore[arg-type]  # an int constant
    elts: list[ast.expr] = [ast.Constant(v) for v in value]  # type: ignore[union-attr]  # a tuple's
    return ast.Tuple(elts, ast.Load()) if c.kind is tuple else ast.List(elts, ast.Load())


def _unknown_name(task: Task, name: str) -> str:
    """Why `--shape name=...` is refused: a derived constant names what it follows."""
    tree = _parse(task.source, task.path)
    derived = _derived(tree, set(task.constants)).get(name)
    if derived is not None:
        bases, text = derived
        return (
            f"--shape {name}: {name} is computed from {', '.join(bases)} in task {task.name} "
            f"(`{name} = {text}`); set {' and '.join(bases)} instead"
        )
    known = ", ".join(sorted(task.constants)) or "none"
    return f"unknown --shape name {name!r} for task {task.name}; its size constants: {known}"


def _derived(tree: ast.Module, constants: set[str]) -> dict[str, tuple[tuple[str, ...], str]]:
    """Module-level names bound once to an expression of size constants (directly or through
    other such names): name -> (the constants, the expression's text)."""
    counts = _binding_counts(tree)
    uses: dict[str, tuple[set[str], str]] = {}
    for stmt in tree.body:
        for name, node in _bindings(stmt):
            if name not in constants and counts[name] == 1:
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                uses[name] = (names, ast.unparse(node)[:120])

    def bases(name: str, seen: frozenset[str]) -> set[str]:
        if name in constants:
            return {name}
        if name not in uses or name in seen:
            return set()
        return set().union(*(bases(n, seen | {name}) for n in uses[name][0]))

    out = {}
    for name, (_, text) in uses.items():
        found = bases(name, frozenset())
        if found:
            out[name] = (tuple(sorted(found)), text)
    return out


def _binding_counts(tree: ast.Module) -> dict[str, int]:
    counts: dict[str, int] = {}
    for stmt in tree.body:
        for name in _bound_names(stmt):
            counts[name] = counts.get(name, 0) + 1
    return counts


def _int_value(node: ast.expr) -> int | None:
    """The value of an int literal or an arithmetic expression of int literals, else None."""
    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _int_value(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _int_value(node.left), _int_value(node.right)
        if left is None or right is None or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        if isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= right <= 64:
            return None
        return _BINOPS[type(node.op)](left, right)
    return None


def _bound_names(stmt: ast.stmt) -> list[str]:
    """Names a module-level statement binds (assignments, defs, imports, loop targets)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                names += _bound_names(child)
    return names


def _module_bindings(tree: ast.Module) -> set[str]:
    return {name for stmt in tree.body for name in _bound_names(stmt)}


# -- small helpers ---------------------------------------------------------------------------------

_module_ids = itertools.count()


def _size_value(name: str, value: Any, default: Size) -> Size:
    """`value` for the constant `name`, whose value in the task is `default`; raises TaskError."""
    if not isinstance(default, tuple):
        return _positive_int(name, value)
    parsed = value
    if isinstance(value, str):
        try:
            parsed = parse_size(value)
        except ValueError:
            parsed = None
    if _is_int(parsed) and len(default) == 1:
        parsed = (parsed,)
    if not (
        isinstance(parsed, (tuple, list))
        and len(parsed) == len(default)
        and all(_is_int(v) and v >= 0 for v in parsed)
    ):
        example = ",".join(str(v) for v in default)
        raise TaskError(
            f"--shape {name}={_size_text(value)}: {name} is a tuple of {len(default)} in task "
            f"(now {_size_text(default)}); give {len(default)} non-negative integers, e.g. "
            f"--shape {name}={example}"
        )
    return tuple(parsed)


def _canonical(value: Any, default: Size | None = None) -> Any:
    """`value` in the form Task keeps (tuples, not lists; a 1-tuple for a bare int where the
    task's constant is one; parsed text), or `value` itself where it is no size at all."""
    if isinstance(value, str):
        try:
            value = parse_size(value)
        except ValueError:
            return value
    if isinstance(value, list):
        value = tuple(value)
    if isinstance(default, tuple) and len(default) == 1 and _is_int(value):
        value = (value,)
    return value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise TaskError(f"--shape {name}={value}: the value must be a positive integer")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise TaskError(
                f"--shape {name}={value}: the value must be a positive integer"
            ) from None
    if not isinstance(value, int) or value < 1:
        raise TaskError(f"--shape {name}={value!r}: the value must be a positive integer")
    return value


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:40]


def _one_line(e: BaseException) -> str:
    lines = f"{type(e).__name__}: {e}".strip().splitlines()
    return lines[0][:300] if lines else type(e).__name__


def _where(e: BaseException, path: str) -> str:
    """`path:line: ` of the innermost frame of `e` in the task file, else `path: `."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
    return f"{path}:{frames[-1].lineno}: " if frames else f"{path}: "


def _sizes_text(sizes: Mapping[str, Size]) -> str:
    return ", ".join(f"{k}={_size_text(v)}" for k, v in sizes.items()) or "(no size constants)"


def _size_text(value: Any) -> str:
    """A size as Python writes it: 64, (3, 5), (4096,)."""
    return repr(tuple(value)) if isinstance(value, (tuple, list)) else str(value)
