"""The fusion codegen's graph: canonical ops over values with traced shapes and symbolic dtypes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

# A dtype that follows the task's --dtype (float32 when traced at fp32, float16 at fp16).
TASK = "task"

# Node kinds. Compute kinds (pw, red, mm, conv) are what groups are made of; the rest stay Python.
INPUT, PARAM, SCALAR, TORCH, PW, RED, MM, CV, STORE = (
    "input",
    "param",
    "scalar",
    "torch",
    "pw",
    "red",
    "mm",
    "conv",
    "store",
)


@dataclass(eq=False)
class Node:
    """One value of the forward: a canonical op applied to nodes and Python constants."""

    name: str
    kind: str
    op: str
    args: tuple[Any, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, ...] | None = None
    dtype: torch.dtype | str | None = None
    # For torch/scalar nodes: the fx node to re-emit, with fx nodes mapped to Nodes in `args`.
    target: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    users: list[Node] = field(default_factory=list)
    # The fx node this one came from (softmax's amax, sub, exp, div all say "softmax").
    origin: str = ""

    def __repr__(self) -> str:
        return f"%{self.name}={self.op}{list(self.shape) if self.shape is not None else ''}"

    @property
    def is_float(self) -> bool:
        return self.dtype == TASK or (
            isinstance(self.dtype, torch.dtype) and self.dtype.is_floating_point
        )

    def tensor_args(self) -> list[Node]:
        return [a for a in flat_args(self.args) if isinstance(a, Node)]


def flat_args(args: Any) -> list[Any]:
    """Every leaf of a nested tuple/list/dict of arguments, in order."""
    if isinstance(args, (list, tuple)):
        return [leaf for a in args for leaf in flat_args(a)]
    if isinstance(args, dict):
        return [leaf for a in args.values() for leaf in flat_args(a)]
    return [args]


@dataclass
class Graph:
    """The normalised forward: nodes in execution order, the inputs, and the returned structure."""

    nodes: list[Node]
    inputs: list[Node]
    output: Any
    # Python statements with side effects the forward must keep (num_batches_tracked += 1).
    effects: list[tuple[int, str]] = field(default_factory=list)
    # The forward's loop whose body (its step) this graph is, or None (loops.py).
    loop: Any = None

    def link_users(self) -> None:
        for n in self.nodes:
            n.users = []
        for n in self.nodes:
            for a in set(n.tensor_args()) | set(_kwarg_nodes(n)):
                a.users.append(n)

    def output_nodes(self) -> list[Node]:
        return [a for a in flat_args(self.output) if isinstance(a, Node)]


def _kwarg_nodes(n: Node) -> list[Node]:
    return [a for a in flat_args(n.kwargs) if isinstance(a, Node)]


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(torch.broadcast_shapes(*shapes))


def reduced_shape(shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)
