"""einops' `rearrange` of a traced value, written as the reshape and permute it stands for.

A task may import einops (`from einops import rearrange`); a candidate may not, and fx cannot
trace einops (it does not know a Proxy). While the task is traced (trace.py), the task's name
for `rearrange` is bound to `traced_rearrange`: on a Proxy it records `reshape`, `permute` and
`reshape` nodes whose sizes are the input's own (`x.size(1) // l`: nodes too), so the
candidate's forward writes plain torch and stays right at other sizes; on anything else it is
einops' own function. Patterns: named axes, parenthesised groups, one `...`, and unit axes
(`1` or `()`); an axis is split by the lengths given as keywords, at most one unknown per group.
"""

from __future__ import annotations

import math
import operator
import re
from typing import Any

import torch.fx as fx

from .unsupported import Unsupported

_TOKEN = re.compile(r"\.\.\.|\(|\)|[A-Za-z_][A-Za-z0-9_]*|1")


class PatternError(Unsupported):
    """A rearrange pattern this module does not write (the tracer then stops, with the reason)."""


def parse_side(side: str) -> list[list[str]]:
    """`b (c l) ... 1` -> [["b"], ["c", "l"], ["..."], []]: one list per dimension."""
    dims: list[list[str]] = []
    group: list[str] | None = None
    for tok in _TOKEN.findall(side):
        if tok == "(":
            if group is not None:
                raise PatternError(f"nested parentheses in {side!r}")
            group = []
        elif tok == ")":
            if group is None:
                raise PatternError(f"unbalanced parentheses in {side!r}")
            dims.append(group)
            group = None
        elif group is not None:
            if tok != "1":
                group.append(tok)
        else:
            dims.append([] if tok == "1" else [tok])
    if group is not None:
        raise PatternError(f"unbalanced parentheses in {side!r}")
    if "".join(_TOKEN.findall(side)).replace(" ", "") != re.sub(r"\s+", "", side):
        raise PatternError(f"unexpected characters in {side!r}")
    return dims


def _expand(dims: list[list[str]], rank: int | None) -> list[list[str]]:
    """`...` as as many anonymous axes as make `rank` dimensions in all."""
    dots = [i for i, d in enumerate(dims) if "..." in d]
    if not dots:
        return dims
    if len(dots) > 1 or dims[dots[0]] != ["..."]:
        raise PatternError("`...` at most once, and not inside parentheses")
    if rank is None:
        raise PatternError("`...` needs the input's rank")
    i = dots[0]
    extra = rank - (len(dims) - 1)
    if extra < 0:
        raise PatternError(f"the pattern has more dimensions than the input's {rank}")
    return dims[:i] + [[f"...{k}"] for k in range(extra)] + dims[i + 1 :]


def traced_rearrange(real):
    """`rearrange` for the task's module while it is traced (see the module's docstring)."""

    def rearrange(tensor: Any, pattern: str, **lengths: int) -> Any:
        if not isinstance(tensor, fx.Proxy):
            return real(tensor, pattern, **lengths)
        return proxy_rearrange(tensor, pattern, lengths, _rank(tensor))

    rearrange.__name__ = getattr(real, "__name__", "rearrange")
    return rearrange


def _rank(x: fx.Proxy) -> int | None:
    value_of = getattr(x.tracer, "_value_of", None)
    if value_of is None or getattr(x.tracer, "inputs", None) is None:
        return None
    try:
        return value_of(x.node).dim()
    except Exception:
        return None


def proxy_rearrange(x: Any, pattern: str, lengths: dict[str, int], rank: int | None) -> Any:
    """The reshape/permute/reshape of `pattern` on x (a Proxy or a tensor: the same calls)."""
    if pattern.count("->") != 1:
        raise PatternError(f"a rearrange pattern has one '->': {pattern!r}")
    lhs_text, rhs_text = pattern.split("->")
    lhs = _expand(parse_side(lhs_text), rank)
    if rank is not None and len(lhs) != rank:
        raise PatternError(f"{lhs_text.strip()!r} names {len(lhs)} dimensions of {rank}")
    rhs = parse_side(rhs_text)
    dots = sum(len(d) == 1 and d[0].startswith("...") for d in lhs)
    rhs = _expand(rhs, len(rhs) - 1 + dots if any("..." in d for d in rhs) else len(rhs))
    left = [a for d in lhs for a in d]
    right = [a for d in rhs for a in d]
    if sorted(left) != sorted(right) or len(set(left)) != len(left):
        raise PatternError(f"both sides must name the same axes once each: {pattern!r}")
    unknown = set(lengths) - set(left)
    if unknown:
        raise PatternError(f"lengths of axes the pattern does not name: {sorted(unknown)}")
    sizes: dict[str, Any] = {}
    for i, group in enumerate(lhs):
        dim = x.size(i)
        if len(group) == 1:
            sizes[group[0]] = dim
            continue
        known = [a for a in group if a in lengths]
        missing = [a for a in group if a not in lengths]
        if len(missing) > 1:
            raise PatternError(f"axes {missing} of one group need all but one length given")
        for a in known:
            sizes[a] = lengths[a]
        if missing:
            sizes[missing[0]] = operator.floordiv(dim, math.prod(lengths[a] for a in known))
    out = x
    if any(len(g) != 1 for g in lhs):
        out = out.reshape(*(sizes[a] for a in left))
    order = [left.index(a) for a in right]
    if order != list(range(len(order))):
        out = out.permute(*order)
    if any(len(g) != 1 for g in rhs):
        shape = []
        for group in rhs:
            dim: Any = 1
            for k, a in enumerate(group):
                dim = sizes[a] if k == 0 else operator.mul(dim, sizes[a])
            shape.append(dim)
        out = out.reshape(*shape)
    return out
