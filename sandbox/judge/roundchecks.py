"""The judge's checks of a timed round's outputs: every call's outputs against eager's on the
same inputs, on inputs no check has seen.

A part of Evaluation through TimedChecks (timed.py), which mixes it in: a round is timed there
and its outputs (the judge's own copies) are judged here. A round's calls are compared stacked, in
chunks of at most BATCH_CHECK_BYTES; a chunk that misses is judged call by call, where the
float64 reference decides an ill-conditioned element (judge_timed_mismatch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .verdict import _mismatch_text, _one_line, _to64

# A round's outputs are checked in stacked comparisons of at most this many bytes each (the
# round's calls in chunks; a chunk that misses is judged call by call).
BATCH_CHECK_BYTES = 256 << 20


class RoundChecks:
    """The checks of the candidate's timed rounds (the attributes are Evaluation's)."""

    if TYPE_CHECKING:
        timed_edge_cases: int

        def __getattr__(self, name: str) -> Any: ...

    def check_round(self, r: int, outs: list[Any], sets: list[list[Any]], failures: list) -> None:
        """Every call's outputs of round r against eager's on the same inputs: in stacked
        chunks of at most BATCH_CHECK_BYTES; a chunk that misses (or cannot be stacked), and
        every call of a task whose one output is larger, is judged call by call, which finds
        the call and judges its edge cases (judge_timed_mismatch). Stops at the first failure."""
        from .compare import compare, flatten_outputs

        torch, ctx = self.torch, self.ctx
        n = len(outs)
        chunk = check_chunk(n, ctx.main.output_bytes)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            with torch.no_grad():
                refs = [ctx.main.ref(*sets[k]) for k in range(lo, hi)]
            if hi - lo > 1 and self.round_within(outs[lo:hi], refs):
                continue
            for k in range(lo, hi):
                ref = refs[k - lo]
                pairs = zip(flatten_outputs(outs[k]), flatten_outputs(ref))
                if any(
                    isinstance(b, torch.Tensor) and compare(a, b, ctx.dtype) is not None
                    for (_, a), (_, b) in pairs
                ):
                    self.judge_timed_mismatch(r * n + k, outs[k], ref, sets[k], failures)
                if failures:
                    return
            del refs

    def round_within(self, outs: list[Any], refs: list[Any]) -> bool:
        """Every call's outputs of a round within eager's tolerance, judged in one comparison
        per output leaf over the round's calls stacked (the comparison is elementwise, so this
        is the calls' comparisons at once: ~64 small checks cost what one does). False when
        any is not, or when the calls' outputs cannot be stacked (another structure, shape or
        dtype in some call): the caller then judges call by call."""
        from .compare import compare, flatten_outputs

        torch = self.torch
        flat_refs = [flatten_outputs(r) for r in refs]
        flat_outs = [flatten_outputs(o) for o in outs]
        leaves = len(flat_refs[0])
        if any(len(f) != leaves for f in flat_refs + flat_outs):
            return False
        for j in range(leaves):
            rs = [f[j][1] for f in flat_refs]
            if not isinstance(rs[0], torch.Tensor):
                continue  # as call by call: only tensor leaves are compared in a timed round
            os = [f[j][1] for f in flat_outs]
            if not (_stackable(rs, rs[0]) and _stackable(os, rs[0])):
                return False
            if compare(torch.stack(os), torch.stack(rs), self.ctx.dtype) is not None:
                return False
        return True

    def judge_timed_mismatch(self, i: int, out, ref, pristine: list, failures: list) -> None:
        """A timed output outside the allclose tolerance of eager's, on inputs no check has seen.

        On an ill-conditioned output two equally accurate fp32 results can differ by more than
        the tolerance at an element or two (measured on the H200: level2/06). The float64
        reference of the round decides, as in the checks: an output within the precision limit
        and compare's float64-widened tolerance passes, with a note; a memoised, stale or
        partial output is orders of magnitude past both.
        """
        from .compare import PRECISION_FACTOR, compare, precision_limit, rel_error

        torch = self.torch
        try:
            with torch.no_grad():
                ref64 = self.ctx.main.ref64(*_to64(pristine, torch))
            err, eager = rel_error(out, ref64), rel_error(ref, ref64)
            elementwise = compare(out, ref, self.ctx.dtype, ref64=ref64)
        except Exception as e:  # no float64 verdict here: the allclose miss stands
            failures.append(("drift", f"timed call {i}: wrong result ({_one_line(e)})"))
            return
        policy = self.config.precision
        if err > precision_limit(eager, self.ctx.dtype, policy) and elementwise is None:
            # eager's own error a few ulps away counts too (nearby.py)
            nearby = self.nearby(self.ctx.main, pristine)
            eager = max(eager, nearby.worst(None, err / PRECISION_FACTOR))
        limit = precision_limit(eager, self.ctx.dtype, policy)
        if err > limit or elementwise is not None:
            where = f"; {_mismatch_text(elementwise)}" if elementwise is not None else ""
            failures.append(
                (
                    "drift",
                    f"timed call {i}: wrong result (relative error vs float64 {err:.2e}, "
                    f"eager's {eager:.2e}, allowed {limit:.2e}{where})",
                )
            )
        else:
            self.timed_edge_cases += 1


def check_chunk(n: int, output_bytes: int) -> int:
    """Calls per stacked comparison of a round of n calls (1: call by call)."""
    return max(1, min(n, BATCH_CHECK_BYTES // max(output_bytes, 1)))


def _stackable(ts: list[Any], like: Any) -> bool:
    """Tensors of one dtype, all of `like`'s shape and device: torch.stack takes them."""
    import torch

    if not isinstance(ts[0], torch.Tensor):
        return False
    want = (like.shape, ts[0].dtype, like.device)
    return all(isinstance(t, torch.Tensor) and (t.shape, t.dtype, t.device) == want for t in ts)
