"""Verdict, and the small pure helpers that the judge's evaluation and its timing share."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from typing import Any

from ..crossing import transport
from ..errors import KernelwrightError
from ..results import Mismatch, fault_of


class Verdict(KernelwrightError):
    """Ends an evaluation with a status, the rule that fired, and a message for the critic."""

    def __init__(self, status: str, message: str, rule: str | None = None, recycle: bool = False):
        super().__init__(message)
        self.status, self.message, self.rule, self.recycle = status, message, rule, recycle
        self.fault = fault_of(status, rule)


@dataclasses.dataclass
class _Opaque:
    """An output leaf that is not a plain strided tensor, by its type name."""

    name: str
    subclass: bool = False
    layout: str = ""


# -- small pure helpers ----------------------------------------------------------------------------


def _structure(node: Any, ref: Any, path: str, device: str) -> tuple[str, str] | None:
    """compare.check_structure over the candidate's description of its output."""
    torch = transport.torch
    if not isinstance(node, dict):
        return "output-type", f"{path}: the candidate process described no output"
    if isinstance(ref, (tuple, list)):
        items = node.get("tuple", node.get("list"))
        if not isinstance(items, list):
            return "output-type", f"{path} is a {_node_kind(node)}, expected a {type(ref).__name__}"
        if len(items) != len(ref):
            return "shape", f"{path} has {len(items)} outputs, expected {len(ref)}"
        for i, (o, r) in enumerate(zip(items, ref)):
            problem = _structure(o, r, f"{path}[{i}]", device)
            if problem:
                return problem
        return None
    if isinstance(ref, dict):
        pairs = node.get("dict")
        keys = {repr(k)[:200]: k for k in ref}
        if not isinstance(pairs, list) or {p[0] for p in pairs if isinstance(p, list) and p} != set(
            keys
        ):
            return (
                "output-type",
                f"{path} is a {_node_kind(node)}, expected a dict with keys {list(ref)}",
            )
        node_map = {p[0]: p[1] for p in pairs}
        for text, k in keys.items():
            problem = _structure(node_map[text], ref[k], f"{path}[{k!r}]", device)
            if problem:
                return problem
        # The judge keys the rebuilt dict as the reference does.
        node["dict"] = [[keys[t], v] for t, v in node_map.items()]
        return None
    if isinstance(ref, torch.Tensor):
        if "opaque" in node:
            what = f"a {_text(node['opaque'])}" + (
                " (a torch.Tensor subclass)" if node.get("subclass") else ""
            )
            if (
                node.get("layout")
                and node.get("layout") != "torch.strided"
                and not node.get("subclass")
            ):
                return (
                    "output-type",
                    f"{path} has layout {node['layout']}; return a dense (strided) tensor",
                )
            return "output-type", f"{path} is {what}; return a plain torch.Tensor"
        desc = node.get("tensor")
        if not isinstance(desc, dict):
            return "output-type", f"{path} is a {_node_kind(node)}; return a plain torch.Tensor"
        if desc.get("shape") != list(ref.shape):
            return (
                "shape",
                f"{path} has shape {tuple(desc.get('shape') or ())}, expected {tuple(ref.shape)}",
            )
        if desc.get("dtype") != str(ref.dtype).removeprefix("torch."):
            return (
                "dtype",
                f"{path} has dtype torch.{_text(desc.get('dtype'))}, expected {ref.dtype}",
            )
        if not str(desc.get("device", "")).startswith(device):
            return "device", f"{path} is on {_text(desc.get('device'))}, expected {device}"
        return None
    value = node.get("value") if "value" in node else _Opaque(_text(node.get("opaque")))
    numbers = (int, float)
    if type(value) is not type(ref) and not (
        isinstance(value, numbers) and isinstance(ref, numbers)
    ):
        return "output-type", f"{path} is a {_node_kind(node)}, expected a {type(ref).__name__}"
    return None


def _node_kind(node: Any) -> str:
    if not isinstance(node, dict):
        return "nothing"
    for k in ("tuple", "list", "dict"):
        if k in node:
            return k
    if "tensor" in node:
        return "Tensor"
    if "opaque" in node:
        return _text(node["opaque"]).rsplit(".", 1)[-1]
    return type(node.get("value")).__name__


def _task_dict(task) -> dict[str, Any]:
    return {
        "path": task.path,
        "name": task.name,
        "source": task.source,
        "constants": dict(task.constants),
        "overrides": dict(task.overrides),
    }


def _text(value: Any, limit: int = 4000) -> str:
    return str(value)[:limit] if value is not None else ""


def _rule(value: Any) -> str | None:
    return str(value)[:40] if value is not None else None


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**30:.2f} GiB"


def _clone(values: list[Any], torch) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in values]


def _to64(values: list[Any], torch) -> list[Any]:
    return [
        v.to(torch.float64)
        if isinstance(v, torch.Tensor) and v.is_floating_point()
        else (v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v))
        for v in values
    ]


def _tensors(out, torch) -> list[Any]:
    from .compare import flatten_outputs

    return [v for _, v in flatten_outputs(out) if isinstance(v, torch.Tensor)]


def _mismatch_text(m: Mismatch) -> str:
    first = "; ".join(
        f"at {list(idx)} got {got:.6g} expected {exp:.6g}" for idx, got, exp in m.first_bad[:3]
    )
    return (
        f"{m.output}: {m.count} of {m.total} elements differ "
        f"(max abs error {m.max_abs_err:.3g}, max rel error {m.max_rel_err:.3g}); {first}"
    )


def _sizes_text(sizes: dict[str, int | tuple[int, ...]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "(no size constants)"


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:300] if text else type(e).__name__


class _Stopwatch:
    """`with clock("step"):` adds the block's wall time to times["step"]."""

    def __init__(self, times: dict[str, float]):
        self.times = times

    @contextlib.contextmanager
    def __call__(self, name: str):
        started = time.monotonic()
        try:
            yield
        finally:
            self.times[name] = self.times.get(name, 0.0) + time.monotonic() - started
