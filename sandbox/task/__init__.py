"""Load a KernelBench task file, set its size constants, and build its reference and inputs.

Over 700 lines, not split yet: the shapes to try and the shrinking call loading's private size
helpers, and loading calls them back; a split first needs those helpers in a module of their own.
"""

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..contract import torch_dtypes
from ..static.pyparse import compile_tree, parse, serialised
from .metashapes import quick_rnns

DTYPES: dict[str, torch.dtype] = torch_dtypes()

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


# A size constant's value: an int, or a tuple of ints (the task may write it as a list).
Size = int | tuple[int, ...]
# One varying int of a task: (constant, element index), the index None for an int constant.
Slot = tuple[str, int | None]


class TaskError(Exception):
    """A task file or a size override that cannot be used; the message is one line for a user."""


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


# -- shapes to try ---------------------------------------------------------------------------------


def variant_overrides(task: Task) -> list[dict[str, Size]]:
    """Size settings for the "other shape" check, most aggressive first, each a full sizes dict.

    Every size of every constant (each varying element of a tuple constant) is moved:
    1. all of them (`_aggressive`: odd, about 1/7 smaller; small ones by one), re-shrunk while
       the task's tensors (inputs, parameters) would need more memory than at its own sizes;
    2. every multiple of 4 scaled by 3/4 (ratios and divisibility kept);
    3. every size one smaller (a 2 becomes 3), then every size one larger;
    4. all constants but one moved, for each one;
    5. one constant moved at a time.
    Later entries survive constraints between constants (channels % groups, kernel <= input) that
    make the reference itself fail at earlier ones; the caller tries them in order. Where the task
    runs on the meta device, the first entry is the first one the reference runs at there, with
    every size it left alone moved too if the reference still runs (a constraint may pin one
    constant, not the rest), and entries that fail there come last.
    """
    slots = _slot_values(task, task.sizes)
    if not slots:
        return []
    prober = _Prober(task)
    moves = {
        "aggressive": _no_larger(prober, slots, {s: _aggressive(v) for s, v in slots.items()}),
        "ratio": {
            s: v * RATIO[0] // RATIO[1] if v % RATIO[1] == 0 else v for s, v in slots.items()
        },
        "minus": {s: v - 1 if v > MIN_SIZE else v + 1 for s, v in slots.items()},
        "plus": {s: v + 1 for s, v in slots.items()},
    }
    aggressive = moves["aggressive"]
    ladder = [moves[k] for k in ("aggressive", "ratio", "minus", "plus")]
    names = list(dict.fromkeys(name for name, _ in slots))
    own = {k: [s for s in slots if s[0] == k] for k in names}
    if len(names) > 1:
        ladder += [{**aggressive, **{s: slots[s] for s in own[k]}} for k in names]
    ladder += [{**slots, **{s: aggressive[s] for s in own[k]}} for k in names]
    unique: list[dict[Slot, int]] = []
    for c in ladder:
        if c != slots and c not in unique:
            unique.append(c)
    return [_with_slots(task.sizes, c) for c in _meta_ordered(prober, slots, unique, moves)]


def variant_note(task: Task, sizes: Mapping[str, Size], tried: Sequence[str] = ()) -> str:
    """What the "other shape" check at `sizes` covered: the constants it varied and those it did
    not (a tuple constant moved in part is named element by element: `kernel_size[1]`).

    tried: the variants the reference itself failed at before this one, one line each.
    """
    base, other = _slot_values(task, task.sizes), _slot_values(task, sizes)
    varied: list[str] = []
    kept: list[str] = []
    for name in task.constants:
        own = [s for s in base if s[0] == name]
        moved = [s for s in own if other[s] != base[s]]
        if len(moved) == len(own) or not moved:
            (varied if moved else kept).append(name)
        else:
            varied += [f"{name}[{i}]" for _, i in moved]
            kept += [f"{name}[{i}]" for _, i in own if (name, i) not in moved]
    note = f"also checked at {_sizes_text(sizes)} (varied: {', '.join(varied) or 'none'}"
    if kept:
        note += f"; not varied: {', '.join(kept)}, the reference failing at every variant tried "
        note += "that moves them too"
        if tried:
            note += f", e.g. {tried[0]}"
    return note + ")"


def shrink_overrides(task: Task, max_input_bytes: int = 2**20) -> dict[str, Size]:
    """Sizes (a full dict) under which the task's inputs and parameters fit `max_input_bytes`.

    Footprints are measured on the meta device (nothing is allocated): get_inputs() plus the
    parameters and buffers of Model(*get_init_inputs()), floating tensors counted at fp32. A step
    is kept only if the task still builds (and, where its forward runs on meta at the default
    sizes, still runs forward) at the new sizes. Each size of a tuple constant shrinks on its own.
    """
    sizes = dict(task.sizes)
    prober = _Prober(task)
    base = prober.probe(sizes)
    if base is None:
        raise TaskError(
            f"{task.path}: get_inputs() fails on the meta device at {_sizes_text(sizes)}, "
            "so its inputs cannot be measured for shrinking"
        )
    footprint = base.bytes
    for floor in (KEEP_SMALL, MIN_SIZE):
        frozen: set[Slot] = set()
        while footprint > max_input_bytes:
            step = _shrink_step(prober, sizes, base, floor, frozen)
            if step is None:
                break
            sizes, footprint = step
        if footprint <= max_input_bytes:
            break
    return sizes


def input_bytes(task: Task, sizes: Mapping[str, Size] | None = None) -> int:
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


class _Prober:
    """`_probe` of one task, each setting of its sizes probed once."""

    def __init__(self, task: Task):
        self.task = task
        self.seen: dict[str, _Probe | None] = {}

    def probe(self, sizes: Mapping[str, Size]) -> _Probe | None:
        key = json.dumps(dict(sizes), sort_keys=True)
        if key not in self.seen:
            self.seen[key] = _probe(self.task, sizes)
        return self.seen[key]

    def slots(self, values: Mapping[Slot, int]) -> _Probe | None:
        return self.probe(_with_slots(self.task.sizes, values))


def _probe(task: Task, sizes: Mapping[str, Size]) -> _Probe | None:
    """The task at `sizes` on meta, or None when even get_inputs() fails there."""
    with serialised():  # the first meta-tensor op imports torch._dynamo, which parses (pyparse)
        return _probe_unlocked(task, sizes)


def _probe_unlocked(task: Task, sizes: Mapping[str, Size]) -> _Probe | None:
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
        with torch.no_grad(), quick_rnns(model):
            model(*inputs)
    except Exception:
        return _Probe(total, built=True, ran=False)
    return _Probe(total, built=True, ran=True)


def _meta_ordered(
    prober: _Prober,
    slots: dict[Slot, int],
    ladder: list[dict[Slot, int]],
    moves: dict[str, dict[Slot, int]],
) -> list[dict[Slot, int]]:
    """`ladder` with the first entry the reference builds (and runs) at on meta first, extended
    to every size it can also move there, and entries meta refuses last. Unchanged where the task
    tells nothing on meta (its Model does not build there at its own sizes)."""
    base = prober.slots(slots)
    if base is None or not base.built:
        return ladder
    refused: list[dict[Slot, int]] = []
    for entry in ladder:
        probe = prober.slots(entry)
        if probe is not None and probe.as_valid_as(base):
            best = _extended(prober, slots, entry, moves, base)
            rest = [c for c in ladder if c not in (best, entry) and c not in refused]
            return [best, *([entry] if entry != best else []), *rest, *refused]
        refused.append(entry)
    return ladder


def _extended(
    prober: _Prober,
    slots: dict[Slot, int],
    entry: dict[Slot, int],
    moves: dict[str, dict[Slot, int]],
    base: _Probe,
) -> dict[Slot, int]:
    """`entry` with the sizes it leaves at the task's values moved too, where the reference still
    builds and runs on meta in no more memory: each alone (aggressively, else one down, else one
    up; the large sizes already moved shrink further to make room, as `_no_larger` does), then
    the multiples of 4 left together by 3/4, else the large ones among them (a constraint tying
    two of them holds when both scale: `embed_dim % num_heads == 0`, `out_channels` == a
    convolution's output width, where its kernel size must stay)."""
    current = dict(entry)
    limit = max(base.bytes, prober.slots(entry).bytes)  # type: ignore[union-attr]  # entry fits

    def fits(trial: dict[Slot, int]) -> dict[Slot, int] | None:
        probe = prober.slots(trial)
        if probe is not None and probe.as_valid_as(base) and probe.bytes > limit:
            trial = _no_larger(prober, slots, trial, limit)
            probe = prober.slots(trial)
        ok = probe is not None and probe.as_valid_as(base) and probe.bytes <= limit
        return trial if ok else None

    for s, value in slots.items():
        if current[s] != value:
            continue
        for move in ("aggressive", "minus", "plus"):
            alt = moves[move][s]
            trial = fits({**current, s: alt}) if alt != value else None
            if trial is not None and trial[s] != value:
                current = trial
                break
    left = [s for s, v in slots.items() if current[s] == v and v % RATIO[1] == 0]
    large = [s for s in left if slots[s] > SMALL_SIZE]
    for group in (left, large):  # with the small ones (num_heads), else without (a kernel size)
        scaled = {**current, **{s: moves["ratio"][s] for s in group}}
        if len(group) > 1 and (trial := fits(scaled)) is not None:
            return trial
    return current


def _shrink_step(prober: _Prober, sizes, base: _Probe, floor: int, frozen: set[Slot]):
    """The next valid halving (new sizes, footprint) of the least-shrunk size, or None."""
    original = _slot_values(prober.task, prober.task.sizes)
    current = _slot_values(prober.task, sizes)
    order = sorted(
        (s for s in current if original[s] > KEEP_SMALL and current[s] > floor and s not in frozen),
        key=lambda s: (-current[s] / original[s], -current[s]),
    )
    for s in order:
        trial = _with_slots(sizes, {s: max(floor, current[s] // 2)})
        probe = prober.probe(trial)
        if probe is not None and probe.as_valid_as(base):
            return trial, probe.bytes
        frozen.add(s)
    return None


def _no_larger(
    prober: _Prober,
    slots: dict[Slot, int],
    variant: dict[Slot, int],
    limit: int | None = None,
) -> dict[Slot, int]:
    """`variant` with its large sizes moved further until it needs no more memory than the task
    at `slots` (or than `limit` bytes). Where the footprint cannot be measured on meta, `variant`
    is returned unchanged.
    """
    base = prober.slots(slots)
    if base is None:
        return variant
    limit = base.bytes if limit is None else limit
    for _ in range(MAX_VARIANT_SHRINK_ROUNDS):
        probe = prober.slots(variant)
        if probe is None or not probe.as_valid_as(base) or probe.bytes <= limit:
            return variant
        variant = {s: _aggressive(v) if v > SMALL_SIZE else v for s, v in variant.items()}
    return variant


def _aggressive(v: int) -> int:
    """A value that breaks hard-coded sizes and block multiples, no larger except for 2 -> 3."""
    if v > SMALL_SIZE:
        w = v - max(1, v // 7)
        return w - 1 if w % 2 == 0 else w
    return v + 1 if v <= MIN_SIZE else v - 1


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
