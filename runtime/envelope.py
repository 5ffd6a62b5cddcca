"""The verified envelope: what inputs a kernel was checked on (dtype, device, shape, layout), as
data, and the cheap metadata check that sends a call outside it to the reference.

An envelope is a list of per-input specs, one per positional argument of forward:

    Envelope([TensorSpec("float32", (None, 300)), ValueSpec("int", 3)])

`None` in a shape is "any size here" (a dynamic batch dimension); a dimension given as an int
must match exactly. `contiguous=True` asks for a contiguous tensor; False accepts any strides.
The check reads tensor metadata only (no data, no device synchronisation). `Envelope.condition`
is the guard's per-call form of it, one generated expression (which the guard writes into its
unsampled call) and `Envelope.admits` the same as a function: the same verdict as
`mismatch(...) is None`, from the reads it makes (the torch dtype, a device-type flag, the
layout, the shape or the rank and fixed dimensions, contiguity), with no message built; the full
`mismatch` runs only on a miss, to say why.
`Envelope.from_examples` builds one from the inputs a kernel was verified on (the
evaluator's shapes, as `kernelwright export --guard` does): a dimension that differed between the
verified shapes is written as None, one that never did stays exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

# dtype names as torch spells them after "torch." (float32, bfloat16, int64...), for JSON.
_DTYPES: dict[str, torch.dtype] = {
    name: d for name in dir(torch) if isinstance(d := getattr(torch, name), torch.dtype)
}

# The tensor property that answers "on this device type?" without building a torch.device.
_STRIDED = torch.strided
_DEVICE_FLAGS = {
    "cuda": "is_cuda",
    "cpu": "is_cpu",
    "meta": "is_meta",
    "xpu": "is_xpu",
    "mps": "is_mps",
}


def dtype_name(dtype: torch.dtype) -> str:
    """ "float32" for torch.float32: the spelling an envelope stores."""
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class TensorSpec:
    """One tensor input: its dtype, device type ("cuda", "cpu"), shape (None: any size there)
    and whether it must be contiguous."""

    dtype: str
    shape: tuple[int | None, ...]
    device: str | None = None  # None: any device type
    contiguous: bool = True

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r} in a TensorSpec (use e.g. 'float32')")
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "_torch_dtype", _DTYPES[self.dtype])
        object.__setattr__(self, "_admits", _compile((self,)))

    def admits(self, x: Any) -> bool:
        """mismatch(x) is None, without building a message (the guard's per-call check).
        Anything unexpected (an exception reading the metadata) is a "no": mismatch() decides."""
        return self._admits((x,))  # type: ignore[attr-defined]

    def mismatch(self, x: Any, where: str) -> str | None:
        """Why `x` is outside this spec, or None."""
        if not isinstance(x, torch.Tensor):
            return f"{where} is a {type(x).__name__}, verified as a tensor"
        if x.dtype is not self._torch_dtype:  # type: ignore[attr-defined]
            return f"{where} is {dtype_name(x.dtype)}, verified as {self.dtype}"
        if self.device is not None and x.device.type != self.device:
            return f"{where} is on {x.device.type}, verified on {self.device}"
        if x.layout is not torch.strided:
            return f"{where} has layout {x.layout}, verified as strided"
        shape = x.shape
        if len(shape) != len(self.shape):
            return f"{where} has {len(shape)} dims {tuple(shape)}, verified as {self.shape_text()}"
        for got, want in zip(shape, self.shape):
            if want is not None and got != want:
                return f"{where} has shape {tuple(shape)}, verified as {self.shape_text()}"
        if self.contiguous and not x.is_contiguous():
            return f"{where} is not contiguous (strides {x.stride()}), verified contiguous"
        return None

    def shape_text(self) -> str:
        return "(" + ", ".join("*" if d is None else str(d) for d in self.shape) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "tensor",
            "dtype": self.dtype,
            "shape": list(self.shape),
            "device": self.device,
            "contiguous": self.contiguous,
        }


@dataclass(frozen=True)
class ValueSpec:
    """One non-tensor input (an int, a float, a flag): its type, and its value when it was the
    same in every verified input (None: any value of that type)."""

    type: str  # "int", "float", "bool", "str", "NoneType"...
    value: Any = None
    exact: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "_admits", _compile((self,)))

    def admits(self, x: Any) -> bool:
        """mismatch(x) is None, without building a message."""
        return self._admits((x,))  # type: ignore[attr-defined]

    def mismatch(self, x: Any, where: str) -> str | None:
        if type(x).__name__ != self.type:
            return f"{where} is a {type(x).__name__}, verified as a {self.type}"
        if self.exact and x != self.value:
            return f"{where} is {x!r}, verified at {self.value!r}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "value", "type": self.type, "value": self.value, "exact": self.exact}


Spec = TensorSpec | ValueSpec


@dataclass(frozen=True)
class Envelope:
    """The inputs a kernel was verified for: one spec per positional argument of forward.
    Keyword arguments are outside it (a call with any falls back)."""

    inputs: tuple[Spec, ...]

    def __init__(self, inputs: Sequence[Spec]):
        object.__setattr__(self, "inputs", tuple(inputs))
        object.__setattr__(self, "condition", condition(self.inputs))
        object.__setattr__(self, "_admits", _compile(self.inputs))

    def mismatch(self, args: tuple, kwargs: dict) -> str | None:
        """Why a call with these arguments is outside the envelope, or None when it is inside."""
        if kwargs:
            return f"keyword arguments {sorted(kwargs)}: verified with positional inputs only"
        if len(args) != len(self.inputs):
            return f"{len(args)} inputs, verified with {len(self.inputs)}"
        for i, (x, spec) in enumerate(zip(args, self.inputs)):
            problem = spec.mismatch(x, f"input {i}")
            if problem:
                return problem
        return None

    def admits(self, args: tuple) -> bool:
        """Whether a call with these positional arguments (and no keyword arguments) is inside:
        exactly `mismatch(args, {}) is None`, at a fraction of its cost (no message is built).
        The guard calls the compiled check itself (`checker`), one frame fewer."""
        return self._admits(args)  # type: ignore[attr-defined]

    @property
    def checker(self) -> Any:
        """The compiled form of `admits`: one function of the positional arguments."""
        return self._admits  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": [s.to_dict() for s in self.inputs]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Envelope:
        specs: list[Spec] = []
        for d in data["inputs"]:
            if d["kind"] == "tensor":
                specs.append(
                    TensorSpec(
                        d["dtype"], tuple(d["shape"]), d.get("device"), d.get("contiguous", True)
                    )
                )
            elif d["kind"] == "value":
                specs.append(ValueSpec(d["type"], d.get("value"), d.get("exact", True)))
            else:
                raise ValueError(f"unknown input kind {d['kind']!r} in an envelope")
        return cls(specs)

    @classmethod
    def from_examples(
        cls, examples: Sequence[Sequence[Any]], device: str | None = None
    ) -> Envelope:
        """The envelope of these verified input lists (one per verified shape): dtypes and ranks
        must agree; a dimension or value that differed between them becomes "any". `device`:
        the device type the kernel runs on (the examples may live on meta)."""
        if not examples:
            raise ValueError("an envelope needs at least one verified input list")
        counts = {len(e) for e in examples}
        if len(counts) != 1:
            raise ValueError(f"verified input lists of different lengths: {sorted(counts)}")
        return cls([_merged([e[i] for e in examples], i, device) for i in range(counts.pop())])


def condition(specs: tuple[Spec, ...]) -> tuple[str, dict[str, Any]]:
    """The envelope's check as one Python expression of `args` (the positional arguments) and
    the namespace it needs: what `mismatch(args, {}) is None` says, from the metadata reads
    mismatch() makes (in its order), with no loop, no call of a spec and no message; a bool. The
    expression holds names and indices only: every value it compares against (dtypes, shapes,
    sizes, device types, values) is a constant of the namespace, whose names start with "env_".
    It may raise on an odd input: its caller takes that as a "no" (mismatch() then says why)."""
    ns: dict[str, Any] = {"env_Tensor": torch.Tensor, "env_STRIDED": _STRIDED}
    conds = [f"len(args) == {len(specs)}"]
    for i, spec in enumerate(specs):
        x = f"env_x{i}"
        first = f"({x} := args[{i}])"
        if isinstance(spec, TensorSpec):
            ns[f"env_d{i}"] = spec._torch_dtype  # type: ignore[attr-defined]
            conds += [f"isinstance({first}, env_Tensor)", f"{x}.dtype is env_d{i}"]
            if spec.device is not None:
                flag = _DEVICE_FLAGS.get(spec.device)
                if flag is not None:  # a flag of the tensor's: no torch.device built
                    conds.append(f"{x}.{flag}")
                else:
                    ns[f"env_v{i}"] = spec.device
                    conds.append(f"{x}.device.type == env_v{i}")
            conds.append(f"{x}.layout is env_STRIDED")
            if None not in spec.shape:
                ns[f"env_e{i}"] = spec.shape
                conds.append(f"{x}.shape == env_e{i}")
            else:  # the rank, then the fixed dimensions
                conds.append(f"len(env_s{i} := {x}.shape) == {len(spec.shape)}")
                for j, d in enumerate(spec.shape):
                    if d is not None:
                        ns[f"env_k{i}_{j}"] = d
                        conds.append(f"env_s{i}[{j}] == env_k{i}_{j}")
            if spec.contiguous:
                conds.append(f"{x}.is_contiguous()")
        else:
            ns[f"env_t{i}"] = spec.type
            conds.append(f"type({first}).__name__ == env_t{i}")
            if spec.exact:
                ns[f"env_v{i}"] = spec.value
                conds.append(f"not ({x} != env_v{i})")
    return " and ".join(conds), ns


def _compile(specs: tuple[Spec, ...]) -> Any:
    """condition() as a function of the positional arguments (a raise is a "no")."""
    expr, ns = condition(specs)
    source = (
        f"def admits(args):\n    try:\n        return {expr}\n"
        "    except Exception:\n        return False\n"
    )
    exec(compile(source, "<kernelwright envelope>", "exec"), ns)  # names only: see condition
    admits = ns["admits"]
    admits.__doc__ = source  # what the check does, for a reader (and a test)
    return admits


def signature(args: tuple, kwargs: dict | None = None) -> list[str]:
    """A short description of a call's inputs for the log: ["float32[4, 300] cuda", "int"]."""
    items = [*args, *(kwargs or {}).values()]
    return [_describe(x) for x in items[:16]] + (["..."] if len(items) > 16 else [])


def _describe(x: Any) -> str:
    if not isinstance(x, torch.Tensor):
        return type(x).__name__
    layout = "" if x.is_contiguous() else " strided"
    return f"{dtype_name(x.dtype)}{list(x.shape)} {x.device.type}{layout}"


def _merged(values: list[Any], i: int, device: str | None) -> Spec:
    first = values[0]
    if isinstance(first, torch.Tensor):
        if not all(isinstance(v, torch.Tensor) for v in values):
            raise ValueError(f"input {i} is a tensor in some verified inputs only")
        dtypes = {v.dtype for v in values}
        ranks = {v.dim() for v in values}
        if len(dtypes) != 1 or len(ranks) != 1:
            raise ValueError(f"input {i} has different dtypes or ranks across verified inputs")
        dims = zip(*(tuple(v.shape) for v in values))
        shape = tuple(d[0] if len(set(d)) == 1 else None for d in dims)
        contiguous = all(v.is_contiguous() for v in values)
        return TensorSpec(dtype_name(first.dtype), shape, device or first.device.type, contiguous)
    kinds = {type(v).__name__ for v in values}
    if len(kinds) != 1:
        raise ValueError(f"input {i} has different types across verified inputs: {sorted(kinds)}")
    same = all(v == first for v in values)
    if not isinstance(first, (int, float, bool, str, type(None))):
        return ValueSpec(type(first).__name__, None, exact=False)
    return ValueSpec(type(first).__name__, first if same else None, exact=same)
