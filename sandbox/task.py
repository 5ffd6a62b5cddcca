"""Load a KernelBench task file, set its size constants, and build its reference and inputs."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import operator
import traceback
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .pyparse import compile_tree, parse, serialised

DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")

# -- the size-constant heuristic -------------------------------------------------------------------
# A size constant is a module-level `NAME = <int>` (or `NAME: int = <int>`, or one element of
# `h, w = 32, 32`, or an integer expression of literals such as `16 * 1024`) assigned exactly once
# at module level, that is not a bool and that passes two filters:
# - values below 2 are flags, axes, strides and paddings of 1, not sizes: changing them changes
#   what the task computes rather than how big it is;
# - an axis-like name (`dim`, `axis`, or ending in `_dim`/`_axis`, e.g. `reduce_dim = 2`) with a
#   value below 8 is the axis a reduction runs over: no tensor in KernelBench has 8 dimensions, so
#   `dim = 1` is an axis and `dim = 16384` is a size.
MIN_SIZE = 2
AXIS_NAMES = ("dim", "axis")
AXIS_SUFFIXES = ("_dim", "_axis")
MAX_AXIS = 8

# -- the "other shape" variants --------------------------------------------------------------------
# Constants above SMALL_SIZE lose a seventh (at least 1) and are then made odd: an odd size is a
# multiple of no power-of-two block, and 16384 -> 14043, 4096 -> 3511, 64 -> 55 breaks any size
# the kernel hard-codes. Small constants (kernel sizes, strides, heads) move by one: 2 -> 3,
# 3..8 -> one less, so the variant is never larger than the task except where a 2 becomes 3.
SMALL_SIZE = 8
# The ratio-keeping variant scales every multiple of 4 by 3/4: a constant that divides another
# (groups | channels, heads | embed) still divides it, so a task with divisibility constraints
# still runs, and 512 -> 384, 64 -> 48 are no longer powers of two.
RATIO = (3, 4)
# Re-scaling rounds when the aggressive variant would still need more memory than the task.
MAX_VARIANT_SHRINK_ROUNDS = 4

# -- shrinking for the CPU interpreter -------------------------------------------------------------
# Constants up to KEEP_SMALL (kernel sizes, strides, groups, heads, small channel counts) are kept:
# they fix what the task computes and cost few bytes. Larger ones are halved in round-robin, the
# least-shrunk first, which keeps their ratios within a factor of 2 and keeps powers of two (and
# divisibility by small factors) intact; first not below KEEP_SMALL (16 keeps tl.dot's minimum
# tile of 16 usable), then, if the budget is still out of reach, down to MIN_SIZE.
KEEP_SMALL = 16

# Re-drawing parameters: a constant tensor (LayerNorm weight 1, bias 0) gets spread around its
# value: CONSTANT_SPREAD of its magnitude, or ZERO_SPREAD when it is 0 (a bias of 0 +- 0.1 still
# moves every output by far more than the fp32 tolerance of 1e-4).
CONSTANT_SPREAD = 0.5
ZERO_SPREAD = 0.1


class TaskError(Exception):
    """A task file or a size override that cannot be used; the message is one line for a user."""


@dataclass(frozen=True)
class Task:
    """A task file with its size constants (and their defaults) and the overrides asked for."""

    path: str
    name: str
    source: str
    constants: dict[str, int] = field(default_factory=dict)
    overrides: dict[str, int] = field(default_factory=dict)

    @property
    def sizes(self) -> dict[str, int]:
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
    constants = {name: value for name, (value, _) in _size_literals(tree).items()}
    task = Task(path=str(p.resolve()), name=p.stem, source=source, constants=constants)
    return dataclasses.replace(task, overrides=checked_overrides(task, overrides or {}))


def checked_overrides(task: Task, overrides: Mapping[str, Any]) -> dict[str, int]:
    """`overrides` as ints, each naming a size constant of `task`; raises TaskError."""
    checked = {}
    for name, value in overrides.items():
        if name not in task.constants:
            known = ", ".join(sorted(task.constants)) or "none"
            raise TaskError(
                f"unknown --shape name {name!r} for task {task.name}; its size constants: {known}"
            )
        checked[name] = _positive_int(name, value)
    return checked


def task_namespace(task: Task, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The task module executed with its size constants set (task.sizes, then `overrides`).

    The constants are replaced in the AST before execution, so derived constants (`N = 2 * dim`)
    follow them. The module gets a fresh namespace and a unique `__name__`; nothing is registered
    in sys.modules. Errors while executing it become TaskError with the task's line number.
    """
    sizes = {**task.sizes, **checked_overrides(task, overrides or {})}
    tree = _parse(task.source, task.path)
    literals = _size_literals(tree)
    for name, value in sizes.items():
        if name in literals:
            literals[name][1](value)
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


# -- shapes to try ---------------------------------------------------------------------------------


def variant_overrides(task: Task) -> list[dict[str, int]]:
    """Size settings for the "other shape" check, most aggressive first, each a full sizes dict.

    1. every constant moved (`_aggressive`: odd, about 1/7 smaller; small ones by one), re-shrunk
       while its tensors (inputs, parameters) would need more memory than the task's own;
    2. every multiple of 4 scaled by 3/4 (ratios and divisibility kept);
    3. every constant one smaller (a 2 becomes 3), then every constant one larger;
    4. all constants but one moved, for each one;
    5. one constant moved at a time.
    Later entries survive constraints between constants (channels % groups, kernel <= input) that
    make the reference itself fail at earlier ones; the caller tries them in order.
    """
    sizes = task.sizes
    if not sizes:
        return []
    names = list(sizes)
    aggressive = {k: _aggressive(v) for k, v in sizes.items()}
    aggressive = _no_larger(task, sizes, aggressive)
    ratio = {k: v * RATIO[0] // RATIO[1] if v % RATIO[1] == 0 else v for k, v in sizes.items()}
    minus = {k: v - 1 if v > MIN_SIZE else v + 1 for k, v in sizes.items()}
    plus = {k: v + 1 for k, v in sizes.items()}
    candidates = [aggressive, ratio, minus, plus]
    if len(names) > 1:
        candidates += [{**aggressive, k: sizes[k]} for k in names]
    candidates += [{**sizes, k: aggressive[k]} for k in names]
    out: list[dict[str, int]] = []
    for c in candidates:
        if c != sizes and c not in out:
            out.append(c)
    return out


def shrink_overrides(task: Task, max_input_bytes: int = 2**20) -> dict[str, int]:
    """Sizes (a full dict) under which the task's inputs and parameters fit `max_input_bytes`.

    Footprints are measured on the meta device (nothing is allocated): get_inputs() plus the
    parameters and buffers of Model(*get_init_inputs()), floating tensors counted at fp32. A step
    is kept only if the task still builds (and, where its forward runs on meta at the default
    sizes, still runs forward) at the new sizes.
    """
    sizes = dict(task.sizes)
    base = _probe(task, sizes)
    if base is None:
        raise TaskError(
            f"{task.path}: get_inputs() fails on the meta device at {_sizes_text(sizes)}, "
            "so its inputs cannot be measured for shrinking"
        )
    footprint = base.bytes
    for floor in (KEEP_SMALL, MIN_SIZE):
        frozen: set[str] = set()
        while footprint > max_input_bytes:
            step = _shrink_step(task, sizes, base, floor, frozen)
            if step is None:
                break
            sizes, footprint = step
        if footprint <= max_input_bytes:
            break
    return sizes


def input_bytes(task: Task, sizes: Mapping[str, int] | None = None) -> int:
    """Bytes of get_inputs() at `sizes` with floating tensors at fp32, measured on meta."""
    ns = task_namespace(task, sizes)
    with serialised(), torch.device("meta"):
        return _tensor_bytes(ns["get_inputs"]())


@dataclass(frozen=True)
class _Probe:
    """The task at some sizes on the meta device."""

    bytes: int  # inputs, plus parameters and buffers when built, floating ones at fp32
    built: bool  # Model(*get_init_inputs()) was constructed
    ran: bool  # and its forward ran

    def as_valid_as(self, base: _Probe) -> bool:
        """Whatever worked at the task's own sizes works here too."""
        return (self.built or not base.built) and (self.ran or not base.ran)


def _probe(task: Task, sizes: Mapping[str, int]) -> _Probe | None:
    """The task at `sizes` on meta, or None when even get_inputs() fails there."""
    with serialised():  # the first meta-tensor op imports torch._dynamo, which parses (pyparse)
        return _probe_unlocked(task, sizes)


def _probe_unlocked(task: Task, sizes: Mapping[str, int]) -> _Probe | None:
    try:
        ns = task_namespace(task, sizes)
        with torch.device("meta"):
            inputs = list(ns["get_inputs"]())
    except Exception:
        return None
    total = _tensor_bytes(inputs)
    try:
        with torch.device("meta"):
            model = ns["Model"](*ns["get_init_inputs"]())
    except Exception:
        return _Probe(total, built=False, ran=False)
    total += _tensor_bytes([*model.parameters(), *model.buffers()])
    try:
        with torch.no_grad():
            model(*inputs)
    except Exception:
        return _Probe(total, built=True, ran=False)
    return _Probe(total, built=True, ran=True)


def _shrink_step(task, sizes, base: _Probe, floor: int, frozen: set[str]):
    """The next valid halving (new sizes, footprint) of the least-shrunk constant, or None."""
    original = task.sizes
    order = sorted(
        (k for k in sizes if original[k] > KEEP_SMALL and sizes[k] > floor and k not in frozen),
        key=lambda k: (-sizes[k] / original[k], -sizes[k]),
    )
    for name in order:
        trial = {**sizes, name: max(floor, sizes[name] // 2)}
        probe = _probe(task, trial)
        if probe is not None and probe.as_valid_as(base):
            return trial, probe.bytes
        frozen.add(name)
    return None


def _no_larger(task: Task, sizes: dict[str, int], variant: dict[str, int]) -> dict[str, int]:
    """`variant` with its large constants moved further until it needs no more memory than `sizes`.

    Where the footprint cannot be measured on meta, `variant` is returned unchanged.
    """
    base = _probe(task, sizes)
    if base is None:
        return variant
    for _ in range(MAX_VARIANT_SHRINK_ROUNDS):
        probe = _probe(task, variant)
        if probe is None or not probe.as_valid_as(base) or probe.bytes <= base.bytes:
            return variant
        variant = {k: _aggressive(v) if v > SMALL_SIZE else v for k, v in variant.items()}
    return variant


def _aggressive(v: int) -> int:
    """A value that breaks hard-coded sizes and block multiples, no larger except for 2 -> 3."""
    if v > SMALL_SIZE:
        w = v - max(1, v // 7)
        return w - 1 if w % 2 == 0 else w
    return v + 1 if v <= MIN_SIZE else v - 1


# -- reference and inputs --------------------------------------------------------------------------


def build_reference(ns: Mapping[str, Any], dtype, device, seed: int) -> nn.Module:
    """Model(*get_init_inputs()) on `device` in `dtype`, floating parameters/buffers re-drawn.

    Default initialisation (LayerNorm weight 1, bias 0) hides a kernel that ignores its
    parameters; every floating parameter and buffer is re-drawn from a seeded generator with the
    mean and spread of its default values (see `redraw_`). The model keeps its default training
    mode (KernelBench semantics: batch norm uses batch statistics).
    """
    dtype, device = as_dtype(dtype), torch.device(device)
    with seeded(seed, device):
        init_inputs = list(ns["get_init_inputs"]())
        with torch.device(device):
            model = ns["Model"](*init_inputs)
    redraw_(model, seed)
    return model.to(device=device, dtype=dtype)


def build_inputs(ns: Mapping[str, Any], dtype, device, seed: int) -> list[Any]:
    """get_inputs() under seeded generators; floating tensors cast to `dtype`, all on `device`.

    On a GPU, get_inputs runs with `device` as torch's default device, so its torch.randn & co.
    draw there: a GB of inputs drawn on the host takes seconds, and the evaluator draws fresh
    inputs many times per candidate. A get_inputs that cannot run that way (it needs host
    tensors: numpy, pin_memory) draws on the host. Tensors are always copied (a task may hand out
    the same module-level tensor twice), keep their strides (a transposed or sliced input stays
    non-contiguous) and expanded dimensions stay expanded. Non-tensor inputs pass through.
    """
    dtype, device = as_dtype(dtype), torch.device(device)
    inputs = None
    if device.type == "cuda":
        try:
            with seeded(seed, device), device:
                inputs = list(ns["get_inputs"]())
        except Exception:
            inputs = None
    if inputs is None:
        with seeded(seed, device):  # the device's RNG too, for a get_inputs that draws there
            inputs = list(ns["get_inputs"]())
    return [_placed(x, dtype, device) for x in inputs]


def load_parameters(src: nn.Module | list[tuple[str, torch.Tensor]], dst: nn.Module) -> list[str]:
    """Copy parameters and buffers of `src` into `dst`; returns dst's names that found no match.

    By name where the name and shape match, else in order among the unused tensors of `src`
    with the same shape and the same kind (floating or not). `src` may be the (name, tensor)
    list of a module that lives in another process (the judge's reference).
    """
    source = src if isinstance(src, list) else _named_tensors(src)
    used: set[str] = set()
    pending = []
    with torch.no_grad():
        for name, t in _named_tensors(dst):
            s = dict(source).get(name)
            if s is not None and s.shape == t.shape and _same_kind(s, t):
                t.copy_(s)
                used.add(name)
            else:
                pending.append((name, t))
        rest = [(n, s) for n, s in source if n not in used]
        unmatched = []
        for name, t in pending:
            match = next(
                (i for i, (_, s) in enumerate(rest) if s.shape == t.shape and _same_kind(s, t)),
                None,
            )
            if match is None:
                unmatched.append(name)
                continue
            t.copy_(rest.pop(match)[1])
    return unmatched


def redraw_(model: nn.Module, seed: int) -> nn.Module:
    """Re-draw every floating parameter and buffer of `model` in place, keeping its magnitude.

    A tensor with spread keeps its mean and standard deviation; a constant one gets spread around
    its value (CONSTANT_SPREAD relative, ZERO_SPREAD for zeros); a non-negative one (running_var,
    a scale of ones) stays non-negative: uniform in [max(0, m - sqrt(3) s), m + sqrt(3) s].
    Left alone: integer and bool buffers (num_batches_tracked, indices), tensors holding inf or
    NaN (a -inf attention mask), and 0/1 buffers holding both values (a causal mask registered as
    `torch.tril(torch.ones(n, n))`): their values are the task's semantics, not weights.
    """
    generators: dict[torch.device, torch.Generator] = {}
    buffers = {id(b) for b in model.buffers()}
    with torch.no_grad():
        for _, t in _named_tensors(model):
            if not t.is_floating_point() or t.numel() == 0 or t.device.type == "meta":
                continue
            if not torch.isfinite(t).all() or (id(t) in buffers and _is_mask(t)):
                continue
            if t.device not in generators:
                generators[t.device] = torch.Generator(device=t.device).manual_seed(seed)
            t.copy_(_redrawn(t, generators[t.device]))
    return model


def _is_mask(t: torch.Tensor) -> bool:
    """True for a tensor of 0s and 1s that holds both."""
    zeros, ones = (t == 0), (t == 1)
    return bool((zeros | ones).all() and zeros.any() and ones.any())


def _redrawn(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    values = t.detach().double()
    mean = values.mean().item()
    std = values.std(unbiased=False).item() if t.numel() > 1 else 0.0
    lo, hi = values.min().item(), values.max().item()
    if std <= 1e-12 * max(1.0, abs(mean)):
        std = CONSTANT_SPREAD * abs(mean) if mean != 0 else ZERO_SPREAD
    if lo >= 0 and hi > 0:
        half = math.sqrt(3.0) * std
        low, high = max(0.0, mean - half), mean + half
        u = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float64)
        return low + (high - low) * u
    return mean + std * torch.randn(t.shape, generator=gen, device=t.device, dtype=torch.float64)


@contextlib.contextmanager
def seeded(seed: int, device: torch.device | str = "cpu") -> Iterator[None]:
    """torch's global RNG (CPU, and `device` if CUDA) seeded inside, restored afterwards."""
    device = torch.device(device)
    cuda = (
        [device.index if device.index is not None else torch.cuda.current_device()]
        if (device.type == "cuda")
        else []
    )
    with torch.random.fork_rng(devices=cuda, device_type="cuda"):
        torch.default_generator.manual_seed(seed)
        for index in cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield


def as_dtype(dtype) -> torch.dtype:
    """A torch.dtype from "fp32"/"fp16"/"bf16" or a torch.dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}") from None


def _placed(x: Any, dtype: torch.dtype, device: torch.device) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)(_placed(v, dtype, device) for v in x)
    if not isinstance(x, torch.Tensor):
        return x
    target = dtype if x.is_floating_point() else x.dtype
    expanded = [d for d, (n, s) in enumerate(zip(x.shape, x.stride())) if s == 0 and n > 1]
    if expanded:  # keep a broadcast input broadcast: move one slice, expand it again
        base = x
        for d in expanded:
            base = base.narrow(d, 0, 1)
        return _placed(base, dtype, device).expand(x.shape)
    out = torch.empty_strided(x.shape, x.stride(), dtype=target, device=device)
    out.copy_(x)
    return out


def _named_tensors(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [*model.named_parameters(), *model.named_buffers()]


def _same_kind(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_floating_point() == b.is_floating_point()


def _tensor_bytes(values: Any) -> int:
    """Bytes of the tensors in `values` (nested lists/tuples), floating ones counted at fp32."""
    if isinstance(values, (list, tuple)):
        return sum(_tensor_bytes(v) for v in values)
    if not isinstance(values, torch.Tensor):
        return 0
    size = 4 if values.is_floating_point() else values.element_size()
    return values.numel() * size


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


def _size_literals(tree: ast.Module) -> dict[str, tuple[int, Callable[[int], None]]]:
    """Size constants: name -> (value, a setter that puts another value into the AST)."""
    counts: dict[str, int] = {}
    for stmt in tree.body:
        for name in _bound_names(stmt):
            counts[name] = counts.get(name, 0) + 1
    found = {}
    for stmt in tree.body:
        for name, node, setter in _int_assignments(stmt):
            value = _int_value(node)
            if value is not None and counts.get(name) == 1 and _is_size(name, value):
                found[name] = (value, setter)
    return found


def _int_assignments(stmt: ast.stmt) -> list[tuple[str, ast.expr, Callable[[int], None]]]:
    """(name, value node, setter) of `NAME = v`, `NAME: int = v` and `a, b = v1, v2`."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1:
            return []
        target, value = targets[0], stmt.value
        if isinstance(target, ast.Name):
            return [(target.id, value, _setter(stmt, "value", None, value))]
        if (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
        ):
            return [
                (t.id, v, _setter(value, "elts", i, v))
                for i, (t, v) in enumerate(zip(target.elts, value.elts))
                if isinstance(t, ast.Name)
            ]
    return []


def _setter(parent: ast.AST, attr: str, index: int | None, old: ast.expr):
    """A function that replaces `old` (parent.attr or parent.attr[index]) by an int literal."""

    def put(value: int) -> None:
        new = ast.copy_location(ast.Constant(value), old)
        if index is None:
            setattr(parent, attr, new)
        else:
            getattr(parent, attr)[index] = new

    return put


def _int_value(node: ast.expr) -> int | None:
    """The value of an int literal or an arithmetic expression of int literals, else None."""
    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _int_value(node.left), _int_value(node.right)
        if left is None or right is None or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        if isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= right <= 64:
            return None
        return _BINOPS[type(node.op)](left, right)
    return None


def _is_size(name: str, value: int) -> bool:
    if value < MIN_SIZE:
        return False
    lower = name.lower()
    axis_like = lower in AXIS_NAMES or lower.endswith(AXIS_SUFFIXES)
    return not (axis_like and value < MAX_AXIS)


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


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items()) or "(no size constants)"
