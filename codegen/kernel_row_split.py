"""Template: the split path of a row group (kernel_row.py), for rows too few to fill the GPU.

One program per row leaves most SMs idle when the rows are few and long: 16 rows of 2**22
elements run 16 programs on an H200's 132 SMs (6% of the roofline). Here each row is split over
n_splits programs, each a whole number of ROW_LOOP_BLOCK blocks of it. Pass by pass (the streamed
row kernel's passes, kernel_row_stream.py) a partial kernel writes each (row, split)'s partial
statistics: sums and extrema, (value, index) for argmax/argmin, the max and the sum of exp
relative to it for softmax, Welford states (count, mean, M2) for variance. A tiny combine kernel
(kernel_split.combine_lines, the statistics template's) merges them per row in split order
(deterministic, no atomics) and computes the ops on the statistics; an apply kernel over
(row, split) then writes the full-size outputs with the group's fused epilogue. The input is
read as often as by the streamed row kernel (once per statistics pass, once to write).

The choice is made at call time by `_row_splits` from the rows, their length and the device's
SM count, so the file serves any size; the split path is only written into files whose traced
rows would take it on an H200.
"""

from __future__ import annotations

import math
import re
from functools import partial
from typing import TYPE_CHECKING, Any

from . import ops
from .ir import PW, RED, Node
from .kernel_split import NEG_INF, combine_lines, partial_parts
from .pysrc import call, comment_lines, docstring, drop_dead
from .template import render
from .tunables import TUNABLES
from .unsupported import Unsupported

if TYPE_CHECKING:
    from .partition import Geometry

H200_SMS = 132  # what `_row_splits` assumes off CUDA (the interpreter), and the codegen's gate
SPLIT_REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "sumexp"}

ops.HELPERS["_row_splits"] = f'''def _row_splits(n_rows, n_red, device):
    """Programs per row of a row group: 1 (one program per row) unless the rows are fewer than
    ROW_SPLIT_WAVES programs per SM and longer than ROW_MAX_BLOCK (streamed); then SPLIT_PROGRAMS
    programs share the rows. Off CUDA (the interpreter) an H200's {H200_SMS} SMs."""
    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    else:
        sms = {H200_SMS}
    if n_rows >= ROW_SPLIT_WAVES * sms or triton.next_power_of_2(n_red) <= ROW_MAX_BLOCK:
        return 1
    return max(1, min(triton.cdiv(n_red, ROW_LOOP_BLOCK), SPLIT_PROGRAMS // n_rows))
'''

# A program's part of its row: [split * chunk, (split + 1) * chunk), chunk a multiple of BLOCK_R.
_SPAN = "split * chunk, tl.minimum(split * chunk + chunk, n_red)"

# Partial and apply kernels: program (row, split), the row kernel's tile with ROWS = 1.
_STREAM_KERNEL = """
@triton.jit
$signature
    $doc
    pid = tl.program_id(0)
    split = tl.program_id(1)
    if WIDE:  # past 2**31 elements the offsets need 64 bits
        pid = pid.to(tl.int64)
    red_idx = pid * ROWS + tl.arange(0, ROWS)
    red_mask = red_idx < n_outer
    row_start = red_idx * n_red
    $body
"""

# Combine kernel: BLOCK_K rows, each with its n_splits partial states in a (BLOCK_K, BLOCK_S) tile.
_COMBINE_KERNEL = '''
@triton.jit
$signature
    """Combine each row's partial statistics in split order (deterministic), then the ops on
    them."""
    red_idx = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    red_mask = red_idx < n_outer
    split = tl.arange(0, BLOCK_S)
    wmask = red_mask[:, None] & (split[None, :] < n_splits)
    slot = red_idx[:, None] * n_splits + split[None, :]
    $body
'''

_LAUNCHER = """
$signature
    $doc
    # Each program takes a whole number of ROW_LOOP_BLOCK blocks of its row.
    chunk = triton.cdiv(triton.cdiv(n_red, n_splits), ROW_LOOP_BLOCK) * ROW_LOOP_BLOCK
    n_splits = triton.cdiv(n_red, chunk)
    block_s = triton.next_power_of_2(n_splits)
    block_k = max(1, min(triton.next_power_of_2(n_outer), 4096 // block_s))
    warps = ROW_WARPS or (4 if ROW_LOOP_BLOCK <= 2048 else 8 if ROW_LOOP_BLOCK <= 8192 else 16)
    wide = n_outer * n_red >= 2**31
    $passes
"""

# The row launcher's branch to the split path ($split in kernel_row._LAUNCHER).
_BRANCH = """
n_splits = _row_splits(n_outer, n_red, $device)
if n_splits > 1:  # few long rows: each split over n_splits programs
    $call
    return $outs
"""


def takes_split(geo: Geometry) -> bool:
    """Whether rows of this traced geometry would take the split path on an H200 with the
    default tunables: only those files carry it (api._render decides once per candidate)."""
    full, dims = geo.full, geo.dims
    if geo.groups is not None:
        n_outer, n_red = full[0] * geo.groups, math.prod(full[1:]) // geo.groups
    elif dims[-1] == len(full) - 1:
        n_outer, n_red = math.prod(full[: dims[0]]), math.prod(full[dims[0] :])
    else:
        return False  # a middle dim: (row, column block) programs, enough of them
    waves = TUNABLES["ROW_SPLIT_WAVES"].default
    longest = TUNABLES["ROW_MAX_BLOCK"].default
    return n_outer < waves * H200_SMS and 1 << max(n_red - 1, 0).bit_length() > longest


def _comment(text: str) -> list[str]:
    """A comment wrapped for a function body (kernel or launcher), given unindented."""
    return [line.removeprefix("    ") for line in comment_lines(text, "    ")]


class RowSplit:
    """The split path's kernels and launcher for the group RowWriter `rw` writes."""

    def __init__(self, rw: Any) -> None:  # kernel_row.RowWriter, which imports this module
        self.rw = rw
        self.w = rw.w
        self.g = rw.g
        if not rw.inner1 or self.g.layout is not None or self.g.gathers or self.g.stores:
            raise Unsupported("split rows: whole contiguous rows only")
        for n in self.g.nodes:
            if n.attrs.get("scan") or (n.kind == RED and n.op not in SPLIT_REDUCTIONS):
                raise Unsupported(f"split rows: no partial state for {n.op}")
        self.full_outs = [o for o in self.g.outputs if rw.space[id(o)] == "full"]
        self.red_outs = {id(o) for o in self.g.outputs if rw.space[id(o)] == "red"}
        self.blocks: list[list[str]] = []
        self.passes: list[str] = []
        self.rows: list[Node] = []  # per-row values kept in a workspace for later kernels
        self.inputs_done: set[int] = set()
        self.inputs_only = rw.reduced_members(self.inputs_done)

    # -- kernel pieces ---------------------------------------------------------------------------

    def row_loads(self) -> list[str]:
        """Per-row loads, then the per-row values of the inputs alone (eval batch norm's rstd
        from running_var): every kernel computes those it reads."""
        loads = [line for _name, (kind, line) in self.rw.loads.values() if kind == "red_vec"]
        return loads + self.inputs_only

    def stat_loads(self) -> list[str]:
        return [f"{n.name} = tl.load({n.name}_row_ptr + red_idx, mask=red_mask)" for n in self.rows]

    def candidates(self) -> list[tuple[str, str]]:
        """(kernel parameter, launcher argument) pairs a kernel may use."""
        w = self.w
        pairs = [(f"{t.name}_ptr", t.name) for t in w.tensors]
        pairs += [(f"{n.name}_row_ptr", f"{n.name}_row") for n in self.rows]
        pairs += [(f"{o.name}_ptr", o.name) for o in self.g.outputs]
        for n in self.g.reds:
            pairs += [(f"{n.name}_{p}_ptr", f"{n.name}_{p}") for p in partial_parts(n)]
        pairs += [(s, s) for s in ("n_outer", "n_red", "n_splits", "chunk")]
        pairs += [(a, a) for a in self.rw.index_args] + [(s.name, s.name) for s in w.scalars]
        return pairs

    def kernel(self, template: str, name: str, body: list[str], consts, launch, grid, doc=""):
        """A kernel taking just the parameters its body reads; returns the launcher's call."""
        body = drop_dead(list(body))
        text = "\n".join(render(template, signature="", doc="", body=body))
        used = [(p, a) for p, a in self.candidates() if re.search(rf"\b{p}\b", text)]
        params = [p for p, _a in used] + [f"{c}: tl.constexpr" for c, _v in consts]
        fields = dict(signature=call(f"def {name}", params, "", ":"), body=body)
        if doc:
            fields["doc"] = partial(docstring, doc)
        self.blocks.append(render(template, **fields))
        args = [a for _p, a in used] + [f"{c}={v}" for c, v in consts] + launch
        return [x.removeprefix("    ") for x in call(f"{name}[{grid}]", args, "    ")]

    def partial_states(self, reds: list[Node]) -> list[str]:
        """After a partial kernel's loop: each statistic's partial states, stored per split."""
        lines: list[str] = []
        for n in reds:
            a = n.name
            if n.op == "sumexp" and self.rw.online_pair(n):
                # relative to the split's max (0 where the split is all -inf: its sum is 0)
                m = n.args[1].name
                lines += [
                    f"{a}_ref = tl.where({m} == {NEG_INF}, 0.0, {m})",
                    f"{a}_safe = tl.where({m}_acc == {NEG_INF}, {a}_ref[:, None], {m}_acc)",
                    f"{a} = tl.sum({a}_acc * tl.exp({a}_safe - {a}_ref[:, None]), axis=1)",
                ]
            elif n.op == "mean":  # the split's sum: the combine divides by the row's length
                lines.append(f"{a} = tl.sum({a}_acc, axis=1)")
            elif n.op != "var":  # variance: its Welford state is the partial
                lines += self.rw.acc_final(n)
            values = {"n": f"{a}_n", "mean": f"{a}_mean", "m2": f"{a}_m2", "acc": a, "arg": a}
            if n.op in ("argmax", "argmin"):
                values["acc"] = f"{a}_best"
            for p in partial_parts(n):
                lines.append(
                    f"tl.store({a}_{p}_ptr + red_idx * n_splits + split, {values[p]}, "
                    "mask=red_mask)"
                )
        return lines

    # -- passes ----------------------------------------------------------------------------------

    def stats_pass(self, number: str, reds: list[Node], done: set[int]) -> None:
        rw, w = self.rw, self.w
        device = w.device_expr()
        names = ", ".join(n.name for n in reds)
        comment = _comment(f"accumulate {names} over the row's part")
        body = self.row_loads() + self.stat_loads()
        body += rw.one_stream(reds, [], done, comment, _SPAN, self.partial_states(reds))
        stream = [("ROWS", "1"), ("BLOCK_R", "ROW_LOOP_BLOCK"), ("WIDE", "wide")]
        doc = (
            f"Partial {names} of {w.summary()}: program (row, s) reduces part s of its row "
            "(chunk elements)."
        )
        device_lines = _comment(f"{names} per (row, split), combined per row in split order")
        for n in reds:
            for p in partial_parts(n):
                dtype = "torch.int64" if p == "arg" else "torch.float32"
                device_lines.append(
                    f"{n.name}_{p} = torch.empty((n_outer, n_splits), dtype={dtype}, "
                    f"device={device})"
                )
        lines = device_lines + self.kernel(
            _STREAM_KERNEL,
            f"_{w.title}_partial{number}_kernel",
            body,
            stream,
            ["num_warps=warps"],
            "(n_outer, n_splits)",
            doc,
        )
        combine = [
            line
            for n in reds
            for line in combine_lines(
                n, "n_red", n.args[1].name if n.op == "sumexp" and rw.online_pair(n) else None
            )
        ]
        done |= {id(n) for n in reds}
        before = set(done)
        reduced = rw.reduced_members(done)
        computed = list(reds) + [n for n in self.g.nodes if id(n) in done - before]
        later = [n for n in computed if self.needed_later(n, done)]
        stores = [f"tl.store({n.name}_row_ptr + red_idx, {n.name}, mask=red_mask)" for n in later]
        stores += [
            f"tl.store({n.name}_ptr + red_idx, {n.name}, mask=red_mask)"
            for n in computed
            if id(n) in self.red_outs
        ]
        body = self.row_loads() + self.stat_loads() + combine + reduced + stores
        for n in later:
            dtype = "torch.float32" if n.is_float else "torch.int64"
            lines.append(f"{n.name}_row = torch.empty((n_outer,), dtype={dtype}, device={device})")
        self.rows += later  # the combine kernel writes them, the kernels after it read them
        lines += self.kernel(
            _COMBINE_KERNEL,
            f"_{w.title}_combine{number}_kernel",
            body,
            [("BLOCK_K", "block_k"), ("BLOCK_S", "block_s")],
            [],
            "(triton.cdiv(n_outer, block_k),)",
        )
        self.passes += lines

    def needed_later(self, n: Node, done: set[int]) -> bool:
        """A per-row value that a member not computed yet reads."""
        return any(id(u) in self.rw.members and id(u) not in done for u in n.users)

    def apply_pass(self) -> None:
        w = self.w
        names = ", ".join(o.name for o in self.full_outs)
        comment = _comment(f"write {names} over the row's part")
        body = self.row_loads() + self.stat_loads()
        body += self.rw.one_stream([], self.full_outs, set(), comment, _SPAN)
        stream = [("ROWS", "1"), ("BLOCK_R", "ROW_LOOP_BLOCK"), ("WIDE", "wide")]
        doc = f"{w.summary()}: program (row, s) writes part s of its row from the statistics."
        self.passes += _comment(f"write {names}")
        self.passes += self.kernel(
            _STREAM_KERNEL,
            f"_{w.title}_apply_kernel",
            body,
            stream,
            ["num_warps=warps"],
            "(n_outer, n_splits)",
            doc,
        )

    # -- the whole path --------------------------------------------------------------------------

    def write(self) -> tuple[list[list[str]], list[str]]:
        """(the kernels and the split launcher, the row launcher's branch to it)."""
        rw, w = self.rw, self.w
        _stage, acc_pass = rw.stages()
        passes = sorted(set(acc_pass.values()))
        done = set(self.inputs_done)
        for i, p in enumerate(passes):
            reds = [n for n in self.g.nodes if acc_pass.get(id(n)) == p]
            self.stats_pass(str(i + 1) if len(passes) > 1 else "", reds, done)
        missing = [
            n
            for n in self.g.nodes
            if n.kind == PW and rw.space[id(n)] == "red" and id(n) not in done
        ]
        if missing:
            raise Unsupported(f"split rows: {missing[0].name} is computed from no statistic")
        if self.full_outs:
            self.apply_pass()
        args = (
            [t.name for t in w.tensors]
            + [o.name for o in self.g.outputs]
            + ["n_outer", "n_red", "n_splits"]
            + rw.index_args
            + [s.name for s in w.scalars]
        )
        name = f"_{w.title}_split"
        launcher = render(
            _LAUNCHER,
            signature=call(f"def {name}", args, "", ":"),
            doc=partial(
                docstring,
                f"{w.summary()} over rows too few to fill the GPU: each row split over "
                "n_splits programs.",
            ),
            passes=self.passes,
        )
        branch = render(
            _BRANCH,
            device=w.device_expr(),
            call=partial(call, name, args),
            outs=", ".join(o.name for o in self.g.outputs),
        )
        return [*self.blocks, launcher], branch
