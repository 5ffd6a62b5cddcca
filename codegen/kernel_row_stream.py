"""Template: the streamed variant of the row kernel (kernel_row.py), for rows longer than
ROW_MAX_BLOCK: each row is read in blocks of BLOCK_R, one pass per dependent statistic (max and
sum-of-exp share a pass by online rescaling, mean and variance by Welford), then once more to
write the full-size outputs.

`StreamedPasses` is a base class of kernel_row.RowWriter and uses its classification, loads and
tile: here is which pass computes what, and the accumulators' text, op by op.
"""

from __future__ import annotations

from .ir import PW, RED, STORE, Node
from .pysrc import comment_lines
from .template import render
from .unsupported import Unsupported

# One pass over the row: the accumulators start, every block of the row updates them (the
# full-size members recomputed, the full-size outputs written), and the statistics are finished.
_PASS = """
$comment
$init
$carries
for r_start in range($span, BLOCK_R):
    $tile
    $loads
    $body
    $steps
    $stores
$finals
"""

# Accumulators, by op, before the loop: a tile of partial results ($tile) per program, or a
# Welford state per row ($vec).
_INIT = {
    "sum": "${a}_acc = tl.zeros($tile, tl.float32)",
    "mean": "${a}_acc = tl.zeros($tile, tl.float32)",
    "sumexp": "${a}_acc = tl.zeros($tile, tl.float32)",
    "prod": "${a}_acc = tl.full($tile, 1.0, tl.float32)",
    "amax": '${a}_acc = tl.full($tile, -float("inf"), tl.float32)',
    "amin": '${a}_acc = tl.full($tile, float("inf"), tl.float32)',
    "argmax": """
        ${a}_acc = tl.full($tile, -float("inf"), tl.float32)
        ${a}_arg = tl.zeros($tile, tl.int64)
    """,
    "argmin": """
        ${a}_acc = tl.full($tile, float("inf"), tl.float32)
        ${a}_arg = tl.zeros($tile, tl.int64)
    """,
    "var": """
        ${a}_n = tl.zeros($vec, tl.float32)
        ${a}_mean = tl.zeros($vec, tl.float32)
        ${a}_m2 = tl.zeros($vec, tl.float32)
    """,
}

# The update, by op, for each block $v of the row. argmax/argmin compare strictly: the first
# index wins ties. var: the block's own mean and M2 in registers (exact two-pass), then Chan's
# merge into the running state: no division per element, unlike element-wise Welford.
_STEP = {
    "sum": "${a}_acc += tl.where(mask, $v, 0.0)",
    "mean": "${a}_acc += tl.where(mask, $v, 0.0)",
    "prod": "${a}_acc *= tl.where(mask, $v, 1.0)",
    "amax": """
        ${a}_new = tl.maximum(${a}_acc, tl.where(mask, $v, -float("inf")))
        $online
        ${a}_acc = ${a}_new
    """,
    "amin": """
        ${a}_new = tl.minimum(${a}_acc, tl.where(mask, $v, float("inf")))
        ${a}_acc = ${a}_new
    """,
    "argmax": """
        ${a}_v = tl.where(mask, $v, -float("inf"))
        ${a}_better = ${a}_v > ${a}_acc
        ${a}_acc = tl.where(${a}_better, ${a}_v, ${a}_acc)
        ${a}_arg = tl.where(${a}_better, r_idx$r, ${a}_arg)
    """,
    "argmin": """
        ${a}_v = tl.where(mask, $v, float("inf"))
        ${a}_better = ${a}_v < ${a}_acc
        ${a}_acc = tl.where(${a}_better, ${a}_v, ${a}_acc)
        ${a}_arg = tl.where(${a}_better, r_idx$r, ${a}_arg)
    """,
    "var": """
        ${a}_bn = tl.sum(r_mask.to(tl.float32), axis=0)
        ${a}_bmean = tl.sum(tl.where(mask, $v, 0.0), axis=$ax) / ${a}_bn
        ${a}_bdev = tl.where(mask, $v - ${a}_bmean$e, 0.0)
        ${a}_bm2 = tl.sum(${a}_bdev * ${a}_bdev, axis=$ax)
        ${a}_tot = ${a}_n + ${a}_bn
        ${a}_delta = ${a}_bmean - ${a}_mean
        ${a}_mean += ${a}_delta * (${a}_bn / ${a}_tot)
        ${a}_m2 += ${a}_bm2 + ${a}_delta * ${a}_delta * (${a}_n * ${a}_bn / ${a}_tot)
        ${a}_n = ${a}_tot
    """,
    "sumexp": "${a}_acc += tl.where(mask, tl.exp($v - $m), 0.0)",
}

# Online softmax, inside max $a's update: the running sum $s rescaled to the new max.
_ONLINE = """
${a}_safe = tl.where(${a}_new == -float("inf"), 0.0, ${a}_new)
${s}_acc = ${s}_acc * tl.exp(${a}_acc - ${a}_safe) + tl.exp(
    tl.where(mask, $v, -float("inf")) - ${a}_safe
)
"""

# The statistic, by op, after the loop: the accumulator tile reduced along the row.
_FINAL = {
    "sum": "$a = tl.sum(${a}_acc, axis=$ax)",
    "mean": "$a = tl.sum(${a}_acc, axis=$ax) / n_red",
    "prod": "$a = tl.reduce(${a}_acc, $ax, _mul)",
    "amax": "$a = tl.max(${a}_acc, axis=$ax)",
    "amin": "$a = tl.min(${a}_acc, axis=$ax)",
    "argmax": """
        ${a}_best = tl.max(${a}_acc, axis=$ax)
        $a = tl.min(tl.where(${a}_acc == ${a}_best$e, ${a}_arg, n_red), axis=$ax)
    """,
    "argmin": """
        ${a}_best = tl.min(${a}_acc, axis=$ax)
        $a = tl.min(tl.where(${a}_acc == ${a}_best$e, ${a}_arg, n_red), axis=$ax)
    """,
    "var": "$a = ${a}_m2 / (n_red - $c)",
    "sumexp": "$a = tl.sum(${a}_acc, axis=$ax)",
}

# sum-of-exp updated with its max $m (online softmax): each lane's sum rescaled to the row's max.
_FINAL_ONLINE = """
${a}_safe = tl.where(${m}_acc == -float("inf"), $m$e, ${m}_acc)
$a = tl.sum(${a}_acc * tl.exp(${a}_safe - $m$e), axis=$ax)
"""

# A scan (cumsum, cumprod) block by block: the block's scan plus the carry of the blocks before.
_SCAN_CARRY = {
    "cumsum": "${a}_carry = tl.zeros($vec, tl.float32)",
    "cumprod": "${a}_carry = tl.full($vec, 1.0, tl.float32)",
}
_SCAN_STEP = {
    "cumsum": """
        ${a}_in = tl.where(mask, $v, 0.0)
        $a = tl.cumsum(${a}_in, axis=$ax) + ${a}_carry$e
        ${a}_carry += tl.sum(${a}_in, axis=$ax)
    """,
    "cumprod": """
        ${a}_in = tl.where(mask, $v, 1.0)
        $a = tl.cumprod(${a}_in, axis=$ax) * ${a}_carry$e
        ${a}_carry *= tl.reduce(${a}_in, $ax, _mul)
    """,
}


def _scan(n: Node) -> str:
    return "cumsum" if n.op == "cumsum" else "cumprod"


class StreamedPasses:
    """The streamed branch of RowWriter's kernel (the `else:` of `if ONE_PASS:`)."""

    # -- stages (which pass over the row computes what) ------------------------------------------

    def stages(self) -> tuple[dict[int, int], dict[int, int]]:
        stage: dict[int, int] = {}
        acc_pass: dict[int, int] = {}
        for n in self.g.nodes:
            if n.kind == STORE:
                continue
            args = [stage.get(id(a), 0) for a in n.tensor_args() if id(a) in self.members]
            base = max(args, default=0)
            if n.kind == RED and not n.attrs.get("scan"):
                v = n.args[0]
                p = stage.get(id(v), 0)
                if n.op == "sumexp":
                    m = n.args[1]
                    if not self.online_pair(n):
                        p = max(p, stage.get(id(m), 0))
                acc_pass[id(n)] = p
                stage[id(n)] = p + 1
            else:
                stage[id(n)] = base
        return stage, acc_pass

    def online_pair(self, n: Node) -> bool:
        """sumexp(v, m) with m = amax(v) over the same dims: both in one pass."""
        m = n.args[1]
        return (
            id(m) in self.members
            and m.kind == RED
            and m.op == "amax"
            and m.args[0] is n.args[0]
            and m.attrs["dims"] == n.attrs["dims"]
        )

    # -- the passes ------------------------------------------------------------------------------

    def multi_pass(self, full_outs, red_outs, stores, ind: str) -> list[str]:
        """The streamed branch's lines at indentation `ind` (a block function for render: the
        pass comments wrap at the line length)."""
        stage, acc_pass = self.stages()
        out_pass = max((stage[id(o)] for o in full_outs), default=None)
        passes = sorted(set(acc_pass.values()) | ({out_pass} if out_pass is not None else set()))
        done: set[int] = set()
        # Per-row values of the inputs alone (eval batch norm's rstd from running_var), before
        # the first pass reads them.
        lines: list[str] = self.reduced_members(done)
        for p in passes:
            reds = [n for n in self.g.nodes if acc_pass.get(id(n)) == p]
            outs = full_outs if p == out_pass else []
            comment = comment_lines(f"pass {p + 1}: " + self.pass_comment(reds, outs), ind)
            lines += self.one_stream(reds, outs, done, [c.removeprefix(ind) for c in comment])
            done |= {id(n) for n in reds}
            lines += self.reduced_members(done)
        lines += self.reduced_members(done)
        lines += self.reduced_stores(red_outs, stores)
        return [ind + line if line else line for line in lines]

    def pass_comment(self, reds: list[Node], outs: list[Node]) -> str:
        parts = []
        if reds:
            parts.append("accumulate " + ", ".join(n.name for n in reds))
        if outs:
            parts.append("write " + ", ".join(n.name for n in outs))
        return "; ".join(parts)

    def needed_full(self, roots: list[Node]) -> list[Node]:
        """Full-space members the roots need, in graph order (recomputed in every pass)."""
        need: set[int] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            for a in n.tensor_args():
                if id(a) in self.members and self.space[id(a)] == "full" and id(a) not in need:
                    need.add(id(a))
                    stack.append(a)
        return [n for n in self.g.nodes if id(n) in need]

    def one_stream(
        self,
        reds,
        outs,
        done: set[int],
        comment: list[str],
        span: str = "0, n_red",
        finals: list[str] | None = None,
    ) -> list[str]:
        """One pass over the row, under its comment: accumulate `reds`, write `outs`. `span`
        is the loop's start and end (a split row's program takes part of it), `finals` the
        lines after the loop (by default each statistic finished)."""
        init = [line for n in reds for line in self.acc_init(n)]
        scans = [n for n in self.needed_full(reds + outs) + outs if n.attrs.get("scan")]
        carries = [
            line
            for n in dict.fromkeys(scans)
            for line in render(_SCAN_CARRY[_scan(n)], a=n.name, vec=self.vec())
        ]
        # A scan output (cumsum) is computed block by block here, its carry across blocks.
        full = self.needed_full(reds + outs)
        full += [o for o in outs if o.kind != RED or o.attrs.get("scan")]
        full = [n for n in self.g.nodes if id(n) in {id(x) for x in full}]
        needed_loads = {id(a) for n in full + reds for a in n.tensor_args()}
        body: list[str] = []
        for n in full:
            if n.kind == PW:
                body.append(self.full_line(n))
            elif n.attrs.get("scan"):
                body += self.scan_step(n)
        steps = [
            line
            for n in reds
            # a sum-of-exp paired with its max is updated together with it (online softmax)
            if not (n.op == "sumexp" and self.online_pair(n))
            for line in self.acc_step(n, reds)
        ]
        return render(
            _PASS,
            comment=comment,
            init=init,
            carries=carries,
            tile=self.tile_setup("r_start", stores=bool(outs)),
            loads=self.tile_loads(needed_loads),
            body=body,
            steps=steps,
            stores=[
                f"tl.store({o.name}_ptr + {self.store_offs}, {o.name}, mask=mask)" for o in outs
            ],
            finals=[line for n in reds for line in self.acc_final(n)] if finals is None else finals,
            span=span,
        )

    def vec(self) -> str:
        return "[ROWS]" if self.inner1 else "[BLOCK_I]"

    def acc_init(self, n: Node) -> list[str]:
        if n.op not in _INIT:
            raise Unsupported(f"no row reduction for {n.op}")
        return render(_INIT[n.op], a=n.name, tile=self.tile, vec=self.vec())

    def acc_step(self, n: Node, reds: list[Node]) -> list[str]:
        v = self.text(n.args[0], "full")
        if n.op not in _STEP:
            raise Unsupported(f"no row reduction for {n.op}")
        online: list[str] = []
        if n.op == "amax":
            partner = next(
                (s for s in reds if s.op == "sumexp" and s.args[1] is n and self.online_pair(s)),
                None,
            )
            if partner is not None:
                online = render(_ONLINE, a=n.name, s=partner.name, v=v)
        m = self.text(n.args[1], "full") if n.op == "sumexp" else ""
        return render(_STEP[n.op], **self.fields(n, v=v, m=m), online=online)

    def acc_final(self, n: Node) -> list[str]:
        if n.op not in _FINAL:
            raise Unsupported(f"no row reduction for {n.op}")
        if n.op == "sumexp" and self.online_pair(n):
            return render(_FINAL_ONLINE, **self.fields(n, m=n.args[1].name))
        return render(_FINAL[n.op], **self.fields(n, c=str(n.attrs.get("correction", 0))))

    def scan_step(self, n: Node) -> list[str]:
        v = self.text(n.args[0], "full")
        return render(_SCAN_STEP[_scan(n)], **self.fields(n, v=v))

    def reduced_members(self, done: set[int]) -> list[str]:
        """Reduced-space pointwise members whose operands are all computed by now."""
        lines = []
        for n in self.g.nodes:
            if n.kind != PW or self.space[id(n)] != "red" or id(n) in done:
                continue
            ready = all(id(a) not in self.members or id(a) in done for a in n.tensor_args())
            if ready:
                lines.append(self.red_line(n))
                done.add(id(n))
        return lines
