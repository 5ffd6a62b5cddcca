"""Element index of a broadcast operand, from the linear index of the shape it is read in.

An operand of shape (1, C, 1, 1) read across an (N, C, H, W) context is at (i // (H*W)) % C for
linear index i. Dims are grouped into runs the operand keeps or broadcasts; each kept run costs
one // and one %, with both dropped at the ends (i % (H*W) for (H, W), i // (H*W) for (N, C, 1,
1)). The sizes are computed at run time from the context's shape, never the traced one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .pysrc import prod

FULL, SCALAR, RUNS = "full", "scalar", "runs"


@dataclass
class Access:
    """How an operand is read in a context: the kernel index expression and its launch args."""

    kind: str
    expr: str = ""
    args: list[str] = field(default_factory=list)  # kernel parameter names
    setup: list[str] = field(default_factory=list)  # launcher lines that compute them


def kept_pattern(operand: tuple[int, ...], context: tuple[int, ...]) -> tuple[bool, ...]:
    """Per context dim (size-1 dims dropped): does the operand vary along it?"""
    padded = (1,) * (len(context) - len(operand)) + tuple(operand)
    return tuple(o != 1 for o, c in zip(padded, context) if c != 1)


def access(
    operand: tuple[int, ...], context: tuple[int, ...], runtime: list[str], linear: str, name: str
) -> Access:
    """Access of an operand of traced shape `operand` in a context of traced shape `context`
    whose run-time sizes are the expressions `runtime`, indexed by linear index `linear`."""
    dims = [i for i, c in enumerate(context) if c != 1]
    kept = kept_pattern(operand, context)
    if all(kept):
        return Access(FULL, linear)
    if not any(kept):
        return Access(SCALAR)
    runs: list[list[int]] = []
    for pos, k in enumerate(kept):
        if k and pos > 0 and kept[pos - 1]:
            runs[-1].append(dims[pos])
        elif k:
            runs.append([dims[pos]])
    out = Access(RUNS)
    terms = []
    for j, run in enumerate(runs):
        after = [d for d in dims if d > run[-1]]
        later_kept = [d for r in runs[j + 1 :] for d in r]
        div = prod([runtime[d] for d in after])
        mod = prod([runtime[d] for d in run])
        stride = prod([runtime[d] for d in later_kept])
        term = linear
        if div != "1":
            out.args.append(f"{name}_div{j}")
            out.setup.append(f"{name}_div{j} = {div}")
            term = f"{term} // {name}_div{j}"
        if run[0] != dims[0]:
            out.args.append(f"{name}_mod{j}")
            out.setup.append(f"{name}_mod{j} = {mod}")
            term = f"({term}) % {name}_mod{j}" if " " in term else f"{term} % {name}_mod{j}"
        if stride != "1":
            out.args.append(f"{name}_stride{j}")
            out.setup.append(f"{name}_stride{j} = {stride}")
            term = f"({term}) * {name}_stride{j}"
        terms.append(term)
    out.expr = " + ".join(terms)
    return out
