"""Template: reductions and normalisations over contiguous dims, with the pointwise ops before
and after them, as one row kernel.

The input is viewed as (n_outer, n_red, n_inner): rows of n_red elements are reduced. With
n_inner == 1 (reducing the last dims: softmax, layer_norm, row sums) a program takes ROWS whole
rows, a (ROWS, BLOCK_R) tile; otherwise (reducing a middle dim) a (BLOCK_R, BLOCK_I) tile whose
columns are contiguous in memory, so loads stay coalesced. A row that fits ROW_MAX_BLOCK is read
once into registers (ONE_PASS, written here); a longer one is streamed in blocks, one read per
dependent statistic (max and sum-of-exp share a pass by online rescaling, mean and variance by
Welford), then once more to write the full-size outputs (kernel_row_stream.py).
Measured on the H200 (fp32, 1 GiB in + out): layer_norm (rows of 8192) and rms-norm (4096) at
4.1-4.2 TB/s (1.6x and 4.4x eager), instance norm rows of 16384 4.09 TB/s (1.7x), softmax over
32768-long rows 2.6 TB/s counted once (3 passes: 0.98x eager), group norm rows of 131072
1.8 TB/s (1.1x).

"""

from __future__ import annotations

from functools import partial

from .group_writer import Emitted, GroupWriter
from .index import FULL, SCALAR, access, kept_pattern
from .ir import PW, RED, STORE, Node
from .kernel_row_split import RowSplit
from .kernel_row_stream import StreamedPasses
from .pysrc import call, comment_lines, docstring, prod
from .template import Block, render
from .unsupported import Unsupported

_KERNEL = """
@triton.jit
$signature
    $doc
    pid = tl.program_id(0)
    if WIDE:  # past 2**31 elements the offsets need 64 bits
        pid = pid.to(tl.int64)
    $program
    $row_loads
    if ONE_PASS:
        $one_pass
    else:
        $streamed
"""

# What a program takes, by tile layout: ROWS whole rows (reducing the last dims) ...
_ROWS = """
red_idx = pid * ROWS + tl.arange(0, ROWS)
red_mask = red_idx < n_outer
row_start = red_idx * n_red
"""

# ... or BLOCK_I contiguous columns of one row (reducing a middle dim).
_COLUMNS = """
outer = pid // n_iblocks
inner = (pid % n_iblocks) * BLOCK_I + tl.arange(0, BLOCK_I)
red_mask = inner < n_inner
red_idx = outer * n_inner + inner
row_start = outer * n_red * n_inner + inner
"""

# The tile, BLOCK_R elements of each row from $start: a (ROWS, BLOCK_R) one ...
_ROWS_TILE = """
r_idx = $start
r_mask = r_idx < n_red
$offs
mask = red_mask[:, None] & r_mask[None, :]
"""
_ROWS_OFFS = "offs = row_start[:, None] + r_idx[None, :]"

# ... or a (BLOCK_R, BLOCK_I) one; over a permuted storage order (layout.py, always this tile)
# the outputs are stored in the logical layout, reduced dim last ($out_offs).
_COLUMNS_TILE = """
r_idx = $start
r_mask = r_idx < n_red
$offs
mask = r_mask[:, None] & red_mask[None, :]
$out_offs
"""
_COLUMNS_OFFS = "offs = row_start[None, :] + r_idx[:, None] * n_inner"
_OUT_OFFS = "out_offs = outer * n_red * n_inner + inner[None, :] * n_red + r_idx[:, None]"

# The whole row in registers: every member computed once, in graph order, on the one tile.
_ONE_PASS = """
$tile
$loads
$body
$stores
$reduced_stores
"""

# A statistic over the tile's rows, by op ($v the reduced value, $ax the row's axis).
_REDUCE = {
    "sum": "$a = tl.sum(tl.where(mask, $v, 0.0), axis=$ax)",
    "mean": "$a = tl.sum(tl.where(mask, $v, 0.0), axis=$ax) / n_red",
    "prod": "$a = tl.reduce(tl.where(mask, $v, 1.0), $ax, _mul)",
    "amax": '$a = tl.max(tl.where(mask, $v, -float("inf")), axis=$ax)',
    "amin": '$a = tl.min(tl.where(mask, $v, float("inf")), axis=$ax)',
    "argmax": '$a = tl.argmax(tl.where(mask, $v, -float("inf")), axis=$ax).to(tl.int64)',
    "argmin": '$a = tl.argmin(tl.where(mask, $v, float("inf")), axis=$ax).to(tl.int64)',
    "var": """
        ${a}_mean = tl.sum(tl.where(mask, $v, 0.0), axis=$ax) / n_red
        ${a}_dev = tl.where(mask, $v - ${a}_mean$e, 0.0)
        $a = tl.sum(${a}_dev * ${a}_dev, axis=$ax) / (n_red - $c)
    """,
    "sumexp": "$a = tl.sum(tl.where(mask, tl.exp($v - $m), 0.0), axis=$ax)",
}
_SCAN = {
    "cumsum": "$a = tl.cumsum(tl.where(mask, $v, 0.0), axis=$ax)",
    "cumprod": "$a = tl.cumprod(tl.where(mask, $v, 1.0), axis=$ax)",
}

_LAUNCHER = """
$signature
    $doc
    $layout
    $contiguous
    shape = $shape
    $sizes
    $outputs
    $setup
    $split
    block_r = triton.next_power_of_2(n_red)
    $tiling
    warps = ROW_WARPS or (4 if tile <= 2048 else 8 if tile <= 8192 else 16)
    $launch
    return $outs
"""

# The row view's sizes: group statistics (group norm) ...
_GROUP_SIZES = """
n_outer = shape[0] * $groups
n_red = shape[1] // $groups * $rest
"""

# ... or the dims before, in and after the reduced ones.
_SIZES = """
n_outer = $outer
n_red = $red
$inner
"""

# The tile and the grid, by tile layout: whole rows ...
_ROWS_TILING = """
# A row that fits ROW_MAX_BLOCK stays in registers: one read of the input.
one_pass = block_r <= ROW_MAX_BLOCK
if not one_pass:
    block_r = ROW_LOOP_BLOCK
# Short rows: several per program so a tile holds ~2048 elements.
rows = max(1, min(triton.next_power_of_2(n_outer), 2048 // block_r))
tile = rows * block_r
grid = (triton.cdiv(n_outer, rows),)
"""

# ... or columns, as many as a contiguous layout ...
_COLUMNS_TILING = """
$block_i
n_iblocks = triton.cdiv(n_inner, block_i)
one_pass = block_r * block_i <= ROW_MAX_BLOCK
if not one_pass:
    block_r = max(1, ROW_LOOP_BLOCK // block_i)
tile = block_r * block_i
grid = (n_outer * n_iblocks,)
"""
_BLOCK_I = """
# 32 contiguous columns: each row of the tile is one 128-byte fp32 segment.
block_i = min(triton.next_power_of_2(n_inner), 32)
"""

# ... or a permuted storage order (layout.py) wants.
_BLOCK_I_TRANSPOSED = """
# 16 columns: the transposed store goes through shared memory, and a 1024 x 16 tile still fits
# one pass (H200, level2/14: 0.272 ms against 0.417 with 32 columns, 0.300 with 8).
block_i = min(triton.next_power_of_2(n_inner), 16)
"""


class RowWriter(StreamedPasses):
    def __init__(self, w: GroupWriter) -> None:
        self.w = w
        self.g = w.g
        geo = w.g.geometry
        self.geo = geo
        self.full = geo.full
        self.rank = len(geo.full)
        self.dims = geo.dims
        self.groups = geo.groups
        # The group count as the launcher knows it: a run-time argument when the model has one.
        self.groups_expr = str(geo.groups)
        for n in w.g.reds:
            if self.groups is not None and len(n.args) > 1 and n.args[1].kind == "scalar":
                self.groups_expr = n.args[1].name
        self.inner1 = self.groups is not None or self.dims[-1] == self.rank - 1
        self.members = w.members
        self.space = {id(n): self.space_of(n) for n in self.g.nodes if n.kind != STORE}
        self.ax = 1 if self.inner1 else 0
        # How a per-row vector and a within-row vector broadcast against the tile.
        self.exp_red = "[:, None]" if self.inner1 else "[None, :]"
        self.exp_r = "[None, :]" if self.inner1 else "[:, None]"
        self.tile = "[ROWS, BLOCK_R]" if self.inner1 else "[BLOCK_R, BLOCK_I]"
        self.runtime = [f"shape[{i}]" for i in range(self.rank)]
        self.setup: list[str] = []
        self.index_args: list[str] = []
        self.loads: dict[tuple[int, str], tuple[str, str]] = {}
        self.store_offs = "offs" if w.g.layout is None else "out_offs"

    # -- classification --------------------------------------------------------------------------

    def space_of(self, n: Node) -> str:
        if n.kind == RED:
            return "full" if n.attrs.get("scan") else "red"
        if any(id(a) in self.members and self.space_of(a) == "full" for a in n.tensor_args()):
            return "full"
        if n.shape == self.full and not n.attrs.get("reshape"):
            return "full"
        if self.groups is None and not n.attrs.get("reshape") and self.varies_in_rows(n):
            return "full"  # broadcast over some rows only (a causal mask (1, 1, T, T)): per element
        return "red"

    def varies_in_rows(self, n: Node) -> bool:
        """Whether n varies along a reduced dim: then it is no per-row value. (A per-row value
        may have the reduced shape without its kept dims, (N,) of an (N, C) row group, which
        would not broadcast against the rows: those are per-row by their shape.)"""
        if n.shape is None or n.shape in self.geo.reduced_shapes():
            return False
        nontrivial = [i for i, c in enumerate(self.full) if c != 1]
        kept = kept_pattern(n.shape, self.full)
        return any(k and d in self.dims for d, k in zip(nontrivial, kept))

    def text(self, a: Node, space: str) -> str:
        """How member or input a is written inside an expression of the given space."""
        if a.kind == "scalar":  # a Python number: a kernel argument of the same name
            return a.name
        if id(a) in self.members:
            if space == "full" and self.space[id(a)] == "red":
                return f"{a.name}{self.exp_red}"
            return a.name
        return self.loads[(id(a), space)][0]

    # -- operand loads ---------------------------------------------------------------------------

    def arg_space(self, n: Node, i: int) -> str:
        """The space operand i of member n is read in: a reduction reads its input over the
        full rows and its other operands (softmax's max) per row."""
        if n.kind == RED:
            return "full" if i == 0 else "red"
        return self.space[id(n)]

    def plan_loads(self) -> None:
        for n in self.g.nodes:
            if n.kind == STORE:
                continue
            tensors = [a for a in n.args if isinstance(a, Node)]
            for i, a in enumerate(tensors):
                if id(a) in self.members or a.kind == "scalar":
                    continue
                space = self.arg_space(n, i)
                if (id(a), space) not in self.loads:
                    self.loads[(id(a), space)] = self.load_for(a, space, n)

    def load_for(self, t: Node, space: str, user: Node) -> tuple[str, str]:
        """(name used in expressions, kind) for external tensor t read in a space."""
        if id(t) in self.g.gathers:
            return self.gather_load(t, space)
        suffix = "" if space == "full" else "_r"
        name = f"{t.name}{suffix}"
        ptr = f"{t.name}_ptr"
        cast = ".to(tl.float32)" if _is_float(t) else ""
        if space == "red":
            # Per row: indexed in the row space, not in the user's own traced shape (an eval
            # batch norm's rsqrt(running_var + eps) is (1, C, 1, 1), its rows are B * C).
            ctx, runtime = self.reduced_context(self.row_space(user.shape))
            acc = access(t.shape, ctx, runtime, "red_idx", name)
            self.add_setup(acc)
            kind = "red_vec"
            if acc.kind == SCALAR:
                line = f"{name} = tl.load({ptr}){cast}"
            else:
                line = f"{name} = tl.load({ptr} + {acc.expr}, mask=red_mask){cast}"
            return name, (kind, line)
        kept = kept_pattern(t.shape, self.full)
        nontrivial = [i for i, c in enumerate(self.full) if c != 1]
        varies = {d for d, k in zip(nontrivial, kept) if k}
        if all(kept):
            return name, ("tile", f"{name} = tl.load({ptr} + offs, mask=mask){cast}")
        if not varies:
            return name, ("scalar", f"{name} = tl.load({ptr}){cast}")
        if self.groups is None and not (varies & set(self.dims)):
            ctx, runtime = self.reduced_context(_keepdim(self.full, self.dims))
            acc = access(t.shape, ctx, runtime, "red_idx", name)
            self.add_setup(acc)
            line = f"{name} = tl.load({ptr} + {acc.expr}, mask=red_mask){cast}"
            return f"{name}{self.exp_red}", ("red_vec", line)
        if self.groups is None and varies <= set(self.dims):
            sub = tuple(self.full[d] for d in self.dims)
            padded = (1,) * (self.rank - len(t.shape)) + tuple(t.shape)
            sub_t = tuple(padded[d] for d in self.dims)
            acc = access(sub_t, sub, [self.runtime[d] for d in self.dims], "r_idx", name)
            self.add_setup(acc)
            expr = "r_idx" if acc.kind == FULL else acc.expr
            line = f"{name} = tl.load({ptr} + {expr}, mask=r_mask){cast}"
            return f"{name}{self.exp_r}", ("r_vec", line)
        acc = access(t.shape, self.full, self.runtime, "offs", name)
        self.add_setup(acc)
        return name, ("tile", f"{name} = tl.load({ptr} + {acc.expr}, mask=mask){cast}")

    def gather_load(self, t: Node, space: str) -> tuple[str, str]:
        """An embedding lookup read from its table (gather.py): the tile's rows are rows of the
        index tensor (outer * n_red + r) and its columns the table row's elements (inner)."""
        if space != "full" or self.inner1:
            raise Unsupported(f"{t.name}: a lookup is read as whole rows only")
        weight, index = self.g.gathers[id(t)]
        rows = f"{weight.name}_rows"
        if rows not in self.index_args:
            self.index_args.append(rows)
            self.setup.append(f"{rows} = {weight.name}.shape[0]")
        name, row = t.name, f"{t.name}_row"
        cast = ".to(tl.float32)" if _is_float(t) else ""
        lines = [
            # int64: a table of 2**31 elements or more indexed by int32 ids stays addressable
            f"{row} = tl.load({index.name}_ptr + outer * n_red + r_idx, mask=r_mask).to(tl.int64)",
            f"{name}_offs = {row}[:, None] * n_inner + inner[None, :]",
            f"{name}_mask = mask & ({row}[:, None] >= 0) & ({row}[:, None] < {rows})",
            # other=0.0: an index outside the table adds nothing (the tile mask keeps its lane)
            f"{name} = tl.load({weight.name}_ptr + {name}_offs, mask={name}_mask, other=0.0){cast}",
        ]
        return name, ("tile", "\n".join(lines))

    def add_setup(self, acc) -> None:
        for arg, line in zip(acc.args, acc.setup):
            if arg not in self.index_args:
                self.index_args.append(arg)
                self.setup.append(line)

    def row_space(self, like: tuple[int, ...]) -> tuple[int, ...]:
        """The traced shape of the group's rows for a per-row value of traced shape `like`: the
        full shape with the reduced dims as 1 when `like` broadcasts against it (right-aligned,
        as torch does), else with them dropped (a reduction without keepdim)."""
        if self.groups is not None:
            return like
        kept = _keepdim(self.full, self.dims)
        aligned = kept[len(kept) - len(like) :] if len(like) <= len(kept) else None
        if aligned is not None and all(a in (1, k) for a, k in zip(like, aligned)):
            return kept  # broadcast against the rows with the reduced dims kept as 1
        dropped = tuple(c for i, c in enumerate(self.full) if i not in self.dims)
        return dropped if len(like) == len(dropped) else like

    def reduced_context(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], list[str]]:
        """A reduced value's traced shape and its run-time sizes."""
        if self.groups is not None:
            return shape, ["shape[0]", self.groups_expr][: len(shape)]
        if len(shape) == self.rank:
            return shape, ["1" if i in self.dims else f"shape[{i}]" for i in range(self.rank)]
        return shape, [f"shape[{i}]" for i in range(self.rank) if i not in self.dims]

    # -- writing ---------------------------------------------------------------------------------

    def write(self) -> Emitted:
        w = self.w
        self.plan_loads()
        full_outs = [o for o in self.g.outputs if self.space[id(o)] == "full"]
        red_outs = [o for o in self.g.outputs if self.space[id(o)] == "red"]
        stores = self.g.stores
        tensors = w.tensors
        ptrs = [f"{t.name}_ptr" for t in tensors] + [f"{o.name}_ptr" for o in self.g.outputs]
        sizes = ["n_outer", "n_red"] + ([] if self.inner1 else ["n_inner", "n_iblocks"])
        consts = (["ROWS: tl.constexpr"] if self.inner1 else ["BLOCK_I: tl.constexpr"]) + [
            "BLOCK_R: tl.constexpr",
            "ONE_PASS: tl.constexpr",
            "WIDE: tl.constexpr",
        ]
        params = ptrs + sizes + self.index_args + [s.name for s in w.scalars] + consts
        kernel = render(
            _KERNEL,
            signature=call(f"def {w.kernel}", params, "", ":"),
            doc=partial(docstring, f"{w.summary()}: one program per {self.unit()}."),
            program=render(_ROWS if self.inner1 else _COLUMNS),
            row_loads=[line for _name, (kind, line) in self.loads.values() if kind == "red_vec"],
            one_pass=self.one_pass(full_outs, red_outs, stores),
            streamed=partial(self.multi_pass, full_outs, red_outs, stores),
        )
        split_blocks, self.split_branch = self.split_path()
        tunables = ["ROW_MAX_BLOCK", "ROW_LOOP_BLOCK", "ROW_WARPS"]
        if split_blocks:
            tunables += ["ROW_SPLIT_WAVES", "SPLIT_PROGRAMS"]
        return Emitted(
            w.launcher,
            [kernel, *split_blocks, self.launcher()],
            set(w.body.helpers)
            | self.helpers_used()
            | ({"_row_splits"} if split_blocks else set()),
            tunables,
            f"row ({self.describe()}): {w.summary()}",
            list(self.g.outputs),
        )

    def split_path(self) -> tuple[list[list[str]], list[str]]:
        """The split path's blocks and the launcher's branch to it (kernel_row_split.py), where
        the candidate carries it (GroupWriter.split_rows: the traced rows are few and long);
        none where a statistic has no partial state there (a scan)."""
        if not self.w.split_rows:
            return [], []
        try:
            return RowSplit(self).write()
        except Unsupported:
            return [], []

    def unit(self) -> str:
        return "ROWS rows" if self.inner1 else "(row, BLOCK_I columns)"

    def describe(self) -> str:
        if self.groups is not None:
            return f"group statistics over {self.groups} groups"
        layout = self.g.layout
        if layout is not None:  # in the task's terms: the logical dims, then the stored order
            dims = ", ".join(str(layout[d]) for d in self.dims)
            return f"reduce dim(s) {dims} of a rank-{self.rank} tensor stored in order {layout}"
        dims = ", ".join(str(d) for d in self.dims)
        return f"reduce dim(s) {dims} of a rank-{self.rank} tensor"

    def helpers_used(self) -> set[str]:
        return {"_mul"} if any(n.op in ("prod", "cumprod") for n in self.g.nodes) else set()

    def tile_setup(self, start: str, stores: bool = True) -> list[str]:
        r = f"{start} + tl.arange(0, BLOCK_R)" if start != "0" else "tl.arange(0, BLOCK_R)"
        offs = [_ROWS_OFFS if self.inner1 else _COLUMNS_OFFS] if self.uses_offs() else []
        if self.inner1:
            return render(_ROWS_TILE, start=r, offs=offs)
        out_offs = [_OUT_OFFS] if stores and self.g.layout is not None else []
        return render(_COLUMNS_TILE, start=r, offs=offs, out_offs=out_offs)

    def uses_offs(self) -> bool:
        """Whether the kernel indexes the full tile: a lookup read from its table (gather.py)
        does not, so a group whose only full-size read is one and whose outputs are reduced
        has no use for `offs`."""
        if not self.g.gathers:
            return True
        loads = any(
            kind == "tile" and key not in self.g.gathers
            for (key, _space), (_name, (kind, _line)) in self.loads.items()
        )
        return loads or any(self.space[id(o)] == "full" for o in self.g.outputs)

    def tile_loads(self, needed: set[int]) -> list[str]:
        lines = []
        for (key, _space), (_name, (kind, line)) in self.loads.items():
            if kind != "red_vec" and key in needed:
                lines += line.split("\n")
        return lines

    def fields(self, n: Node, **more: str) -> dict[str, str]:
        """The fields of a statistic's template: its name, the row's axis, how a per-row and a
        within-row vector broadcast against the tile, and `more`."""
        return dict(a=n.name, ax=str(self.ax), e=self.exp_red, r=self.exp_r, **more)

    def full_line(self, n: Node) -> str:
        return self.w.pointwise_line(n, "", lambda a: self.text(a, "full"))

    def red_line(self, n: Node) -> str:
        return self.w.pointwise_line(n, "", lambda a: self.text(a, "red"))

    # -- one pass --------------------------------------------------------------------------------

    def one_pass(self, full_outs, red_outs, stores) -> list[str]:
        needed = {id(a) for n in self.g.nodes for a in n.tensor_args()}
        body: list[str] = []
        for n in self.g.nodes:
            if n.kind == STORE:
                continue
            if n.kind == PW:
                if self.space[id(n)] == "full":
                    body.append(self.full_line(n))
                else:
                    body.append(self.red_line(n))
            elif n.attrs.get("scan"):
                body += self.scan_one(n)
            else:
                body += self.reduce_one(n)
        return render(
            _ONE_PASS,
            tile=self.tile_setup("0", stores=bool(full_outs)),
            loads=self.tile_loads(needed),
            body=body,
            stores=[
                f"tl.store({o.name}_ptr + {self.store_offs}, {o.name}, mask=mask)"
                for o in full_outs
            ],
            reduced_stores=self.reduced_stores(red_outs, stores),
        )

    def reduce_one(self, n: Node) -> list[str]:
        v = self.text(n.args[0], "full")
        if n.op not in _REDUCE:
            raise Unsupported(f"no row reduction for {n.op}")
        m = self.text(n.args[1], "full") if n.op == "sumexp" else ""
        c = str(n.attrs.get("correction", 0))
        return render(_REDUCE[n.op], **self.fields(n, v=v, m=m, c=c))

    def scan_one(self, n: Node) -> list[str]:
        v = self.text(n.args[0], "full")
        return render(_SCAN["cumsum" if n.op == "cumsum" else "cumprod"], **self.fields(n, v=v))

    def reduced_stores(self, red_outs, stores) -> list[str]:
        lines = [f"tl.store({o.name}_ptr + red_idx, {o.name}, mask=red_mask)" for o in red_outs]
        for s in stores:
            buf, value = s.args
            lines.append(f"tl.store({buf.name}_ptr + red_idx, {value.name}, mask=red_mask)")
        return lines

    # -- launcher --------------------------------------------------------------------------------

    def launcher(self) -> list[str]:
        w = self.w
        x = self.g.reds[0].args[0]
        layout = self.g.layout
        order = "" if layout is None else f".permute{layout}"
        layout_comment: Block = []
        if layout is not None:
            layout_comment = partial(
                comment_lines,
                f"Traced inputs are stored in dim order {layout}: read in that order (no copy "
                "when they still are), outputs written in eager's contiguous layout.",
            )
        rt = self.runtime
        d0, d1 = self.dims[0], self.dims[-1]
        if self.groups is not None:
            sizes = render(_GROUP_SIZES, groups=self.groups_expr, rest=prod(rt[2:]))
        else:
            inner = [] if self.inner1 else [f"n_inner = {prod(rt[d1 + 1 :])}"]
            sizes = render(_SIZES, outer=prod(rt[:d0]), red=prod(rt[d0 : d1 + 1]), inner=inner)
        if layout is not None:
            logical = [f"shape[{layout.index(i)}]" for i in range(self.rank)]
            allocations = w.output_allocations(self.g.outputs, lambda o: logical)
        else:
            allocations = w.output_allocations(
                self.g.outputs,
                lambda o: None if self.space[id(o)] == "full" else self.reduced_context(o.shape)[1],
            )
        if self.inner1:
            tiling = render(_ROWS_TILING)
        else:
            block_i = _BLOCK_I if layout is None else _BLOCK_I_TRANSPOSED
            tiling = render(_COLUMNS_TILING, block_i=render(block_i))
        args = [t.name for t in w.tensors] + [s.name for s in w.scalars]
        numel = "n_outer * n_red" if self.inner1 else "n_outer * n_red * n_inner"
        size_args = ["n_outer", "n_red"] + ([] if self.inner1 else ["n_inner", "n_iblocks"])
        launch = (
            [t.name for t in w.tensors]
            + [o.name for o in self.g.outputs]
            + size_args
            + self.index_args
            + [s.name for s in w.scalars]
            + (["ROWS=rows"] if self.inner1 else ["BLOCK_I=block_i"])
            + ["BLOCK_R=block_r", "ONE_PASS=one_pass", f"WIDE={numel} >= 2**31", "num_warps=warps"]
        )
        return render(
            _LAUNCHER,
            signature=call(f"def {w.launcher}", args, "", ":"),
            doc=partial(docstring, f"{w.summary()}."),
            layout=layout_comment,
            contiguous=[f"{t.name} = {t.name}{order}.contiguous()" for t in w.tensors],
            shape=w.shape_expr(x),
            sizes=sizes,
            outputs=[line.removeprefix("    ") for line in allocations],
            setup=self.setup,
            split=self.split_branch,
            tiling=tiling,
            launch=partial(call, f"{w.kernel}[grid]", launch),
            outs=", ".join(o.name for o in self.g.outputs),
        )


def _keepdim(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _is_float(n: Node) -> bool:
    return n.is_float


def write_row(w: GroupWriter) -> Emitted:
    return RowWriter(w).write()
