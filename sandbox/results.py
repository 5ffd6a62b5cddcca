"""EvalResult and friends: the evaluator's verdict on a candidate, frozen, JSON round-trippable."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal[
    "ok", "rejected", "compile_error", "runtime_error", "incorrect", "timeout", "crashed"
]
STATUSES: tuple[str, ...] = typing.get_args(Status)

# Whose failure a verdict is. The evaluator's own: a bug in kernelwright ("evaluator", from the
# worker's or the pool's catch-all), a worker that never started ("worker-start"), a reply the
# pool could not trust ("protocol"), a job a cluster executor lost with every actor it ran on
# ("executor", cluster/); nothing was learned about the candidate. The task's: its
# reference fails at its own shape ("task"), so no candidate can be judged. Anything else is the
# candidate's verdict.
Fault = Literal["candidate", "evaluator", "task"]
EVALUATOR_RULES = frozenset({"evaluator", "worker-start", "protocol", "executor"})


def fault_of(status: str, rule: str | None) -> Fault:
    """Whose failure a verdict (EvalResult status and rule) is: "evaluator", "task" or
    "candidate". A Baseline's "error" (its reference raised) is the task's."""
    if status == "crashed" and rule in EVALUATOR_RULES:
        return "evaluator"
    if (status == "runtime_error" and rule == "task") or status == "error":
        return "task"
    return "candidate"


# The critic reads the message, and it goes into prompts: keep the head (first error lines) and the
# tail (where Python puts the exception) of anything longer.
MAX_MESSAGE_CHARS = 4000


# Every other string a result carries is capped too, at construction and in from_dict: results
# cross process boundaries, go into the store and into prompts, and much of their text is the
# candidate's (kernel names, error text, names quoted in notes). A 300 KB kernel name made a
# 302 KB result. Free text (notes, the variant note, timing notes) gets MAX_TEXT_CHARS; names,
# rules, hashes, versions and dict keys MAX_NAME_CHARS (a Python identifier is rarely past 60).
MAX_TEXT_CHARS = 2000
MAX_NAME_CHARS = 256
_TEXT_FIELDS = frozenset({"notes", "variant_note", "note", "compiled_error", "ops_note"})
# Tuples and dicts keep at most this many entries (a candidate with thousands of kernels or
# autotune configs lists the first ones); a tuple of strings ends with a marker when cut.
MAX_ITEMS = 256


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` cut to `limit` characters, keeping its head and tail around a marker."""
    return _cut(text, limit, "\n")


def _cut(text: str, limit: int, sep: str) -> str:
    if len(text) <= limit:
        return text
    marker = f"{sep}[... {len(text) - limit} characters cut ...]{sep}"
    keep = max(limit - len(marker), 0)
    head = keep * 2 // 3
    return text[:head] + marker + text[len(text) - (keep - head) :]


class _Capped:
    """Caps every string field (and the strings, keys and entries of its tuples and dicts) of a
    result dataclass when it is built; nested records cap themselves."""

    def __post_init__(self) -> None:
        _cap_fields(self)


def _cap_fields(record: Any) -> None:
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name == "message":
            capped = _capped(value, MAX_MESSAGE_CHARS, "\n")
        elif f.name in _TEXT_FIELDS:
            capped = _capped(value, MAX_TEXT_CHARS, "\n")
        else:
            capped = _capped(value, MAX_NAME_CHARS, " ")
        if capped is not value:
            object.__setattr__(record, f.name, capped)


def _capped(value: Any, limit: int, sep: str) -> Any:
    """`value` itself when nothing in it is over the caps, else a capped copy."""
    if isinstance(value, str):
        return _cut(value, limit, sep)
    if isinstance(value, tuple):
        items = tuple(_capped(v, limit, sep) for v in value[:MAX_ITEMS])
        if len(value) > MAX_ITEMS and all(isinstance(v, str) for v in value):
            items += (f"[... {len(value) - MAX_ITEMS} more cut ...]",)
        same = len(items) == len(value) and all(a is b for a, b in zip(items, value))
        return value if same else items
    if isinstance(value, dict):
        entries = list(value.items())[:MAX_ITEMS]
        capped = {
            _cut(k, MAX_NAME_CHARS, " ") if isinstance(k, str) else k: _capped(v, limit, sep)
            for k, v in entries
        }
        same = len(capped) == len(value) and all(
            k in value and value[k] is v for k, v in capped.items()
        )
        return value if same else capped
    return value


class _JsonRecord:
    """to_dict/from_dict/to_json/from_json for the frozen result dataclasses below."""

    def to_dict(self) -> dict[str, Any]:
        return _to_jsonable(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        return _from_jsonable(cls, data)

    @classmethod
    def from_json(cls, text: str):
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class Timing(_Capped):
    """Times of one function (candidate, eager or torch.compile) over interleaved calls, in ms."""

    median_ms: float
    p25_ms: float
    p75_ms: float
    min_ms: float
    max_ms: float
    reps: int

    @property
    def spread(self) -> float:
        """Inter-quartile range over the median: 0.02 means the middle half lies within 2%."""
        return (self.p75_ms - self.p25_ms) / self.median_ms if self.median_ms > 0 else 0.0


@dataclass(frozen=True)
class Timings(_Capped):
    """All times of one evaluation. `meaningful` is False under the Triton interpreter."""

    meaningful: bool
    note: str = ""
    candidate: Timing | None = None
    eager: Timing | None = None
    compiled: Timing | None = None
    compiled_error: str | None = None  # torch.compile failing on the reference is not fatal
    cuda_graphs: bool = False
    # The candidate's time per call by the judge's clock (timed.py), as `candidate.median_ms`;
    # kept as its own field for results written before the judge v3.
    judge_ms_per_call: float | None = None


@dataclass(frozen=True)
class Roofline(_Capped):
    """The physical floor for this task on this device (bytes over bandwidth, FLOPs over peak)."""

    bytes: int
    flops: int
    bandwidth_gbps: float
    peak_tflops: float
    bound_ms: float
    limiter: Literal["memory", "compute"]
    fraction: float | None = None  # policy_ms / candidate median; 1.0 is the roofline itself
    device: str = ""
    # The floor at the fastest arithmetic the precision policy allows, which `fraction` is of;
    # bound_ms (the device's fastest rate on these inputs) is the one no time may beat. They
    # differ for fp32 strict: TF32 products are not allowed, tf32x3's three per product are.
    # 0.0 in records written before the policy's floor was kept: bound_ms is theirs.
    policy_ms: float = 0.0
    policy_tflops: float = 0.0
    policy: str = ""  # how policy_tflops follows from the ceilings, for the reader


@dataclass(frozen=True)
class Mismatch(_Capped):
    """How an output differs from the reference, written for the critic."""

    output: str  # "out", "out[1]", ...
    count: int
    total: int
    max_abs_err: float
    max_rel_err: float
    first_bad: tuple[tuple[tuple[int, ...], float, float], ...] = ()  # (index, got, expected)


@dataclass(frozen=True)
class Correctness(_Capped):
    """What was checked and how close the candidate came."""

    trials: int = 0
    seeds: tuple[int, ...] = ()
    shapes: tuple[dict[str, int | tuple[int, ...]], ...] = ()  # size constants of each shape
    variant_checked: bool = False
    variant_note: str = ""
    atol: float = 0.0
    rtol: float = 0.0
    precision_policy: str = "strict"
    # Where the float64 yardstick was computed: on the device, or on the host when it did not fit.
    precision_judged: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    # The precision rule on the output and call nearest its limit (err / limit highest):
    err_vs_fp64: float | None = None  # ||cand - ref64|| / ||ref64|| there
    eager_err_vs_fp64: float | None = None  # eager's worst error on that output: the yardstick
    precision_limit: float | None = None  # what err_vs_fp64 was allowed to reach there
    deterministic: bool | None = None  # two calls on the same inputs were bitwise equal
    degenerate_task: bool = False  # the reference output does not depend on its inputs
    mismatch: Mismatch | None = None


@dataclass(frozen=True)
class Memory(_Capped):
    """Peak device memory (bytes) of the reference and of the candidate, beside the task's
    footprint: its inputs, outputs and parameters. None where not measured (the interpreter)."""

    footprint_bytes: int = 0
    reference_peak_bytes: int | None = None
    candidate_peak_bytes: int | None = None
    judge_peak_bytes: int | None = None  # the judge's own working set during the evaluation
    limit_bytes: int | None = None  # above it the candidate is rejected (rule "memory")
    note: str = ""


@dataclass(frozen=True)
class KernelStats(_Capped):
    """Compile statistics of one Triton kernel the candidate launched."""

    name: str
    num_warps: int | None = None
    num_stages: int | None = None
    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None
    launches: int = 0


@dataclass(frozen=True)
class Environment(_Capped):
    """Where the result was produced; results from different environments are not comparable."""

    device: str = "cpu"
    gpu: str = ""
    driver: str = ""
    cuda: str = ""
    torch: str = ""
    triton: str = ""
    python: str = ""
    interpreter: bool = False
    isolation: tuple[
        str, ...
    ] = ()  # which sandbox layers were active ("bubblewrap", "seccomp", ...)
    # Why a layer did not hold here (no bubblewrap, user namespaces refused): one line for eval.
    sandbox_note: str = ""
    # Where it ran on a cluster (`--executor ray`): the machine's hostname and the GPU's index on
    # it ("" on the local pool, whose machine is the caller's). Not part of `key`: two H200s
    # with the same versions give comparable times.
    node: str = ""
    gpu_index: str = ""

    @property
    def key(self) -> str:
        """Identity for comparisons and caches: GPU (or cpu) and software versions."""
        return f"{self.gpu or self.device}|torch {self.torch}|triton {self.triton}"


@dataclass(frozen=True)
class EvalResult(_JsonRecord):
    """The evaluator's verdict on one candidate. One per candidate, whatever the candidate did."""

    status: Status
    message: str = ""
    rule: str | None = None  # the rule that fired, for rejected/incorrect ("import", "precision")
    task: str = ""
    task_hash: str = ""
    source_hash: str = ""
    dtype: str = "fp32"
    shape_overrides: dict[str, int | tuple[int, ...]] = field(default_factory=dict)
    correctness: Correctness | None = None
    timings: Timings | None = None
    speedup_eager: float | None = None
    speedup_compiled: float | None = None
    roofline: Roofline | None = None
    kernels: tuple[KernelStats, ...] = ()
    memory: Memory | None = None
    environment: Environment = field(default_factory=Environment)
    wall_s: float = 0.0
    # Wall seconds of each step of the evaluation (load, trials, same_address, drift, variant,
    # timing): where an evaluation's time goes.
    phases_s: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        _cap_fields(self)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def fault(self) -> Fault:
        """Whose verdict this is (see fault_of): "candidate" for an ok result too."""
        return fault_of(self.status, self.rule)

    def summary(self) -> str:
        """One line: status, rule or speedup. For logs and tables."""
        if self.status != "ok":
            why = f" [{self.rule}]" if self.rule else ""
            first = self.message.strip().splitlines()[0] if self.message.strip() else ""
            return f"{self.status}{why}: {first}"[:200]
        parts = ["ok"]
        if self.speedup_eager is not None:
            parts.append(f"{self.speedup_eager:.2f}x vs eager")
        if self.speedup_compiled is not None:
            parts.append(f"{self.speedup_compiled:.2f}x vs torch.compile")
        if self.roofline is not None and self.roofline.fraction is not None:
            parts.append(f"{self.roofline.fraction:.0%} of roofline")
        if self.timings is not None and not self.timings.meaningful:
            parts.append("(correctness only: no meaningful timing here)")
        return ", ".join(parts)


def _to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value


_FLOAT_WORDS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild `tp` from JSON data, following the dataclass annotations."""
    if isinstance(tp, str):
        tp = eval(tp, vars(typing) | globals())  # annotations are strings under `from __future__`
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return None
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        for option in options:
            try:
                return _from_jsonable(option, data)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"{data!r} matches none of {options}")
    if origin is Literal:
        if data not in typing.get_args(tp):
            raise ValueError(f"{data!r} not in {typing.get_args(tp)}")
        return data
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_jsonable(args[0], v) for v in data)
        return tuple(_from_jsonable(a, v) for a, v in zip(args, data))
    if origin is dict:
        _, vt = typing.get_args(tp)
        return {k: _from_jsonable(vt, v) for k, v in data.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {tp.__name__}, got {type(data).__name__}")  # type: ignore[union-attr]  # tp: a class
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        kwargs = {k: _from_jsonable(hints[k], v) for k, v in data.items() if k in known}
        return tp(**kwargs)  # type: ignore[operator]  # tp is a dataclass type, not an instance
    if tp is float:
        if isinstance(data, str) and data in _FLOAT_WORDS:
            return _FLOAT_WORDS[data]
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise TypeError(f"expected a number, got {data!r}")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise TypeError(f"expected an integer, got {data!r}")
        return data
    if tp is bool:
        if not isinstance(data, bool):
            raise TypeError(f"expected a boolean, got {data!r}")
        return data
    if tp is str:
        if not isinstance(data, str):
            raise TypeError(f"expected a string, got {data!r}")
        return data
    if tp is Any:
        return data
    raise TypeError(f"cannot rebuild {tp!r}")


@dataclass(frozen=True)
class OpTime(_Capped):
    """One PyTorch op of the reference forward in the profile (torch.profiler, self time)."""

    name: str
    calls: int  # per forward call
    ms: float  # self time per forward call, device time on CUDA, CPU time otherwise
    share: float  # of the forward's total self time


@dataclass(frozen=True)
class Baseline(_JsonRecord):
    """Times of a task's reference: PyTorch eager, torch.compile, and its roofline."""

    status: Literal["ok", "error", "timeout", "crashed"]
    message: str = ""
    task: str = ""
    task_hash: str = ""
    dtype: str = "fp32"
    shape_overrides: dict[str, int | tuple[int, ...]] = field(default_factory=dict)
    timings: Timings | None = None
    roofline: Roofline | None = None
    # Where the reference spends its time, by op, most expensive first (the planner reads it).
    ops: tuple[OpTime, ...] = ()
    ops_note: str = ""
    environment: Environment = field(default_factory=Environment)
    wall_s: float = 0.0
    # Seconds per step: building the task's context in the worker (reference, other shape,
    # work count, device ceilings, torch.compile; paid by whichever request built it first),
    # then this request's op breakdown and timing.
    setup_s: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _cap_fields(self)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def task_error(self) -> bool:
        """The reference itself fails: the task's fault (fault_of), not the evaluator's."""
        return fault_of(self.status, None) == "task"
