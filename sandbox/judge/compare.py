"""Compare a candidate's outputs with the reference: structure, values, NaN/Inf and precision."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..contract import PRECISION_POLICIES
from ..crossing.outputs import flatten_outputs
from ..results import Mismatch

# (atol, rtol) per evaluation dtype, the one table every comparison uses. An element passes when
# |got - expected| <= atol + rtol * |expected| (torch.allclose's rule), without broadcasting.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    # fp32: 1e-4 is ~840 fp32 ulps (eps 1.2e-7), far above the reassociation error of an honest
    # fp32 kernel (~1e-7 relative at K=16384, measured), yet ~1/5 of one TF32/fp16 rounding
    # (2^-11 = 4.9e-4): fp16, bf16 and TF32 compute fail it on most inputs. The ones it misses
    # (TF32 with torch.rand inputs) the float64 precision check catches. A loose 1e-2 would
    # accept all three.
    torch.float32: (1e-4, 1e-4),
    # fp16: eps 2^-10 = 9.8e-4; 1e-2 is ~10 ulps, room for a fused kernel that rounds once where
    # eager PyTorch rounds after every op (a chain of n ops differs by up to ~n ulps).
    torch.float16: (1e-2, 1e-2),
    # bf16: eps 2^-7 = 7.8e-3, 8x fp16's; 5e-2 is ~6 ulps for the same reason. bf16 compute in
    # an fp16 run, or a bf16 accumulator, is left to the float64 check.
    torch.bfloat16: (5e-2, 5e-2),
    # float64 appears only when a task computes in it: ~1e-12 is 4500 ulps (eps 2.2e-16).
    torch.float64: (1e-10, 1e-10),
}
# Integer and bool outputs must match exactly.
EXACT = (0.0, 0.0)

# -- precision against a float64 reference ---------------------------------------------------------
# The candidate's relative L2 error vs the float64 reference may reach
#   max(PRECISION_FACTOR * eager PyTorch's own error, PRECISION_FLOOR[dtype]).
# Measured on CPU (GEMMs, relative L2 error vs float64):
#   fp32 eager 0.8-1.3e-7 (torch.rand, K=64..16384), blocked K-loop fp32 accumulation <= 1.6x
#   eager; TF32 inputs 4.3e-5 (K=64) .. 2.9e-6 (K=16384) with torch.rand, 2.9e-4 with randn,
#   i.e. >= 22x eager; fp16 run: eager 2.2e-4, fp16 accumulator 1.2e-3 at K=4096 (5.5x),
#   bf16 compute 1.8e-3.
# A factor of 4 leaves honest reorderings (<= 1.6x measured) 2.5x of room while TF32 (22x) and
# fp16 accumulation at K >= 4096 (5.5x) fail.
PRECISION_FACTOR = 4.0
# Floors for outputs PyTorch computes exactly (a copy, a ReLU: eager error 0): room for a few
# roundings of the output and fast-math functions, below what a lower precision gives.
PRECISION_FLOOR: dict[torch.dtype, float] = {
    # 2^-20 = 9.5e-7: ~28 rms fp32 roundings (2^-24/sqrt(3)); TF32 with rand inputs gives
    # 2.9e-6 at K=16384, 3x above it.
    torch.float32: 2.0**-20,
    # 2^-10 = 9.8e-4: ~3.5 rms fp16 roundings (2.8e-4); bf16 compute (2.3e-3 rms) is above it.
    torch.float16: 2.0**-10,
    # 2^-7 = 7.8e-3: ~3.4 rms bf16 roundings (2.3e-3), the same ratio as fp16.
    torch.bfloat16: 2.0**-7,
    torch.float64: 2.0**-40,
}
# --precision tf32-ok: fp32 floor at what TF32 inputs give. TF32 rounds each input to 10 mantissa
# bits (relative error <= 2^-11), a product carries two such errors: ~2^-10 relative at most per
# term; measured 2.9e-4 with randn inputs, 3.4x below.
TF32_FLOOR = 2.0**-10
POLICIES = PRECISION_POLICIES

# -- memory: every comparison works in chunks ------------------------------------------------------
# Elements per chunk. The exact comparison's working set is one chunk's: both operands in float64,
# |out - ref|, |ref| and the bound, plus bool masks, ~44 bytes an element (peak measured on CPU
# with glibc returning freed blocks: 181 MB for a 2^22-element chunk of a transposed fp32 output
# with a float64 reference; rel_error 27, error_stats 23 bytes an element), so ~370 MB at 2^23.
# The judge's budget is 4x the reference's footprint plus 1 GiB; 2^24 would take ~0.7 GiB of it
# for one comparison. A chunk of a non-contiguous tensor (a transposed output, an expanded input)
# is copied alone, never the whole tensor, and a float64 reference kept on another device (the
# host, when it did not fit on the GPU) moves over one chunk at a time. KernelBench's largest
# level-1 outputs (1.6G fp32 elements) take ~200 chunks, one device synchronisation each.
CHUNK_ELEMENTS = 1 << 23
_MAX_FIRST_BAD = 5


def check_structure(out: Any, ref: Any, path: str = "out") -> tuple[str, str] | None:
    """(rule, message) for the first structural difference from `ref`, or None.

    Checked before any value comparison, because allclose broadcasts and casts:
    - "output-type": not exactly torch.Tensor where the reference has a tensor (a subclass, a
      lazy wrapper, a numpy array), a non-strided layout, or a container/value of another kind;
    - "shape": another number of outputs, or another tensor shape;
    - "dtype", "device": another dtype or device.
    Tuples and lists count as the same container.
    """
    if isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)):
            return "output-type", f"{path} is a {_kind(out)}, expected a {type(ref).__name__}"
        if len(out) != len(ref):
            return "shape", f"{path} has {len(out)} outputs, expected {len(ref)}"
        for i, (o, r) in enumerate(zip(out, ref)):
            problem = check_structure(o, r, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            return "output-type", f"{path} is a {_kind(out)}, expected a dict with keys {list(ref)}"
        for k in ref:
            problem = check_structure(out[k], ref[k], f"{path}[{k!r}]")
            if problem:
                return problem
        return None
    if isinstance(ref, torch.Tensor):
        return _tensor_structure(out, ref, path)
    if type(out) is not type(ref) and not (_is_number(out) and _is_number(ref)):
        return "output-type", f"{path} is a {_kind(out)}, expected a {_kind(ref)}"
    return None


def compare(
    out: Any, ref: Any, dtype, ref64: Any = None, tol: tuple[float, float] | None = None
) -> Mismatch | None:
    """How `out` differs from `ref` beyond the tolerance of `dtype`, or None when it does not.

    Full-tensor, in float64 chunks of CHUNK_ELEMENTS on the reference's device. NaN and Inf must
    sit at the same positions with the same signs; a NaN or Inf in `out` where `ref` is finite is
    reported first (see `mismatch_rule`). Assumes `check_structure(out, ref)` passed (a tensor
    leaf of another shape or kind counts as wholly wrong); nested outputs are compared leaf by
    leaf and the first differing leaf is reported. Non-tensor leaves compare by value.

    ref64: the same computation in float64. Given, an element outside the tolerance of `ref`
    (eager's output) still passes when it is within the tolerance of ref64 widened by
    PRECISION_FACTOR x eager's own worst error on that output. On an ill-conditioned output (a
    long cumsum, a sum with cancellation) two equally accurate fp32 results differ by more than
    1e-4 at some elements: on the H200 an honest cumsum kernel over 16384-element rows failed
    at 7526 of 134M elements where eager itself was off by as much. A wrong element is still
    wrong: it must be as close to the exact answer as eager's worst element is. This is the
    max-norm twin of the L2 precision rule (`precision_limit`). Eager's worst error is at least
    the rounding of its largest output (~half an ulp), so an element may be off by ~2 ulps of
    the output's largest magnitude (2.4e-7 x max|out| in fp32): past the 1e-4 atol only for
    outputs beyond ~400, where 1e-4 is a few ulps anyway.

    tol: (atol, rtol) for floating leaves instead of the dtype's (the runtime guard's rtol/atol
    arguments); integer and bool leaves stay exact.
    """
    refs64 = flatten_outputs(ref64) if ref64 is not None else None
    for k, ((name, o), (_, r)) in enumerate(zip(flatten_outputs(out), flatten_outputs(ref))):
        if isinstance(r, torch.Tensor):
            r64 = refs64[k][1] if refs64 is not None and k < len(refs64) else None
            if not isinstance(r64, torch.Tensor) or not r.dtype.is_floating_point:
                r64 = None
            m = _compare_tensor(name, o, r, _leaf_tolerance(dtype, r.dtype, tol), r64)
        else:
            m = _compare_value(name, o, r, _leaf_tolerance(dtype, torch.float64, tol))
        if m is not None:
            return m
    return None


def mismatch_rule(m: Mismatch) -> str:
    """The rule `m` breaks: "nan" if its first bad element is a new NaN/Inf, else "mismatch"."""
    if m.first_bad:
        _, got, expected = m.first_bad[0]
        if not math.isfinite(got) and math.isfinite(expected):
            return "nan"
    return "mismatch"


def tolerance(dtype, out_dtype: torch.dtype | None = None) -> tuple[float, float]:
    """(atol, rtol) for an evaluation in `dtype`; exact for integer and bool outputs."""
    if out_dtype is not None and not (out_dtype.is_floating_point or out_dtype.is_complex):
        return EXACT
    return TOLERANCES[_as_dtype(dtype)]


def _leaf_tolerance(dtype, out_dtype: torch.dtype, tol: tuple[float, float] | None):
    exact = not (out_dtype.is_floating_point or out_dtype.is_complex)
    return tolerance(dtype, out_dtype) if tol is None or exact else tol


def rel_error(out: Any, ref64: Any) -> float:
    """||out - ref64||_2 / ||ref64||_2 in float64, the worst over the output's leaves.

    Positions where both are NaN, or both the same Inf, are left out; a NaN/Inf at any other
    position makes the error inf. A reference that is all zeros gives 0 when `out` is all zeros
    too, else inf.
    """
    worst = 0.0
    for (_, o), (_, r) in zip(flatten_outputs(out), flatten_outputs(ref64)):
        if isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor):
            worst = max(worst, _tensor_rel_error(o, r))
        elif _is_number(o) and _is_number(r):
            worst = max(worst, _tensor_rel_error(torch.tensor(o), torch.tensor(r)))
    return worst


def precision_limit(eager_err: float, dtype, policy: str = "strict") -> float:
    """The largest relative error vs float64 a candidate may have (see PRECISION_FACTOR). The
    same on a GPU and under the Triton interpreter, whose bf16 arithmetic and fp32 -> bf16
    rounding are the GPU's once sandbox/candidate/tritoncompat.py's fixes are in."""
    if policy not in POLICIES:
        raise ValueError(f"unknown precision policy {policy!r}; expected one of {POLICIES}")
    dtype = _as_dtype(dtype)
    floor = PRECISION_FLOOR[dtype]
    if policy == "tf32-ok" and dtype == torch.float32:
        floor = TF32_FLOOR
    return max(PRECISION_FACTOR * eager_err, floor)


def same_bits(a: Any, b: Any) -> bool:
    """Bitwise equality of two outputs (nested allowed): NaN equals the same NaN, -0.0 != 0.0."""
    leaves_a, leaves_b = flatten_outputs(a), flatten_outputs(b)
    if len(leaves_a) != len(leaves_b):
        return False
    return all(_same_leaf(x, y) for (_, x), (_, y) in zip(leaves_a, leaves_b))


def error_stats(out: torch.Tensor, ref: torch.Tensor, dtype) -> tuple[float, float]:
    """(max abs error, max rel error) of `out` against `ref` in float64, over finite errors.

    The relative error divides by |ref| floored at atol/rtol of `dtype` (1.0 when rtol is 0):
    near-zero outputs (GELU of negatives) would otherwise report huge relative errors that mean
    nothing. Positions where either side is NaN or Inf are left out (the comparison judges
    those); 0.0 when nothing is left. Chunked; `ref` may live on another device than `out`.
    """
    atol, rtol = TOLERANCES[_as_dtype(dtype)]
    floor = atol / rtol if rtol else 1.0
    max_abs, max_rel = 0.0, 0.0
    for _, index in _runs(out):
        chunk_abs, chunk_rel = _chunk_errors(out, ref, index, floor)
        max_abs, max_rel = max(max_abs, chunk_abs), max(max_rel, chunk_rel)
    return max_abs, max_rel


def has_bad_values(out: torch.Tensor, ref: torch.Tensor) -> bool:
    """True when `out` holds a NaN or Inf where `ref` (in out's dtype) is finite. Chunked; `ref`
    may live on another device than `out`."""
    if not out.is_floating_point():
        return False
    return any(_chunk_has_bad(out, ref, index) for _, index in _runs(out))


# -- internals -------------------------------------------------------------------------------------


def _tensor_structure(out: Any, ref: torch.Tensor, path: str) -> tuple[str, str] | None:
    if type(out) is not torch.Tensor:
        what = (
            f"a {type(out).__module__}.{type(out).__qualname__} (a torch.Tensor subclass)"
            if isinstance(out, torch.Tensor)
            else f"a {_kind(out)}"
        )
        return "output-type", f"{path} is {what}; return a plain torch.Tensor"
    if out.layout != torch.strided:
        return "output-type", f"{path} has layout {out.layout}; return a dense (strided) tensor"
    if out.shape != ref.shape:
        return "shape", f"{path} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return "dtype", f"{path} has dtype {out.dtype}, expected {ref.dtype}"
    if out.device != ref.device:
        return "device", f"{path} is on {out.device}, expected {ref.device}"
    return None


def _compare_tensor(
    name: str,
    out: torch.Tensor,
    ref: torch.Tensor,
    tol: tuple[float, float],
    ref64: torch.Tensor | None = None,
) -> Mismatch | None:
    if (
        not isinstance(out, torch.Tensor)
        or out.shape != ref.shape
        or out.is_complex() != ref.is_complex()
    ):  # check_structure's job, but a timed call's output is compared without it
        n = ref.numel()
        return Mismatch(name, n, n, math.inf, math.inf)
    atol, rtol = tol
    if _surely_within(out, ref, atol, rtol):
        return None
    shape = tuple(ref.shape) + ((2,) if ref.is_complex() else ())
    if ref.is_complex() or ref64 is None or ref64.shape != ref.shape:
        ref64 = None  # complex: real and imaginary parts, judged without the float64 widening
    slack = PRECISION_FACTOR * _worst_error(ref, ref64) if ref64 is not None else math.inf
    judge = _Judged(atol, rtol, ref64 if math.isfinite(slack) else None, slack)
    for start, index in _runs(ref):
        judge.chunk(out, ref, index, start)
    if judge.count == 0:
        return None
    first = (judge.nonfinite + judge.other)[:_MAX_FIRST_BAD]
    return Mismatch(
        output=name,
        count=judge.count,
        total=math.prod(shape),
        max_abs_err=judge.max_abs,
        max_rel_err=judge.max_rel,
        first_bad=tuple((_unravel(i, shape), got, exp) for i, got, exp in first),
    )


@dataclass
class _Judged:
    """The exact comparison's running totals, one chunk at a time (see `compare`)."""

    atol: float
    rtol: float
    ref64: torch.Tensor | None  # given: widen the tolerance by `slack` around it
    slack: float
    count: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    nonfinite: list[tuple[int, float, float]] = field(default_factory=list)
    other: list[tuple[int, float, float]] = field(default_factory=list)

    def chunk(self, out: torch.Tensor, ref: torch.Tensor, index: tuple, start: int) -> None:
        # Everything below dies on return, before the next chunk is fetched: the peak is one
        # chunk's working set, ~48 bytes an element (see CHUNK_ELEMENTS).
        atol, rtol = self.atol, self.rtol
        o = _chunk(out, index, ref.device, torch.float64)
        r = _chunk(ref, index, ref.device, torch.float64)
        both = torch.isfinite(o) & torch.isfinite(r)
        special_bad = ~both & ~((torch.isnan(o) & torch.isnan(r)) | (o == r))
        diff = (o - r).abs_().masked_fill_(~both, 0.0)
        r_abs = r.abs()
        bad = special_bad | (both & (diff > r_abs.mul(rtol).add_(atol)))
        meaningful = both & (r_abs > atol)  # relative error where |expected| > atol
        rel = torch.div(diff, r_abs, out=r_abs).masked_fill_(~meaningful, 0.0)
        chunk_abs, chunk_rel = torch.stack([diff.max(), rel.max()]).tolist()
        self.max_abs, self.max_rel = max(self.max_abs, chunk_abs), max(self.max_rel, chunk_rel)
        del diff, r_abs, rel, meaningful  # the float64 widening below needs room of its own
        if self.ref64 is not None and bool(bad.any()):  # its chunk moves over only if needed
            e = _chunk(self.ref64, index, ref.device, torch.float64)
            bound = e.abs().mul_(rtol).add_(atol).add_(self.slack)
            near_exact = (o - e).abs_() <= bound
            del bound
            bad &= ~(both & torch.isfinite(e) & near_exact)
            del e, near_exact
        n_bad = int(bad.sum())
        if n_bad == 0:
            return
        self.count += n_bad
        introduced = special_bad & ~torch.isfinite(o) & torch.isfinite(r)
        if len(self.nonfinite) < _MAX_FIRST_BAD:
            n = _MAX_FIRST_BAD - len(self.nonfinite)
            self.nonfinite += _first(introduced, o, r, start, n)
        if len(self.other) < _MAX_FIRST_BAD:
            self.other += _first(bad & ~introduced, o, r, start, _MAX_FIRST_BAD - len(self.other))


def _worst_error(ref: torch.Tensor, ref64: torch.Tensor) -> float:
    """max |ref - ref64| over the elements where both are finite (eager's worst error)."""
    return max((_chunk_worst(ref, ref64, index) for _, index in _runs(ref)), default=0.0)


def _chunk_worst(ref: torch.Tensor, ref64: torch.Tensor, index: tuple) -> float:
    r = _chunk(ref, index, ref.device, torch.float64)
    e = _chunk(ref64, index, ref.device, torch.float64)
    both = torch.isfinite(r) & torch.isfinite(e)
    return float((r - e).abs_().masked_fill_(~both, 0.0).max())


# The fast path's margin: far above float32's rounding of |out - ref| and of the bound (~1e-7
# relative), so a pass there is a pass in exact arithmetic.
_FAST_MARGIN = 1.0 - 1e-5


def _surely_within(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """A sufficient test in float32, a few passes over the data instead of the float64 slices:
    True only when every element is finite and within tolerance; NaN, Inf and anything near the
    edge go the exact way (which also finds the first bad elements)."""
    if ref.dtype not in (torch.float32, torch.float16, torch.bfloat16) or not atol + rtol:
        return False
    return all(_chunk_within(out, ref, index, atol, rtol) for _, index in _runs(ref))


def _chunk_within(out: torch.Tensor, ref: torch.Tensor, index: tuple, atol, rtol) -> bool:
    o = _chunk(out, index, ref.device, torch.float32)
    r = _chunk(ref, index, ref.device, torch.float32)
    bound = r.abs().mul_(rtol).add_(atol).mul_(_FAST_MARGIN)
    return bool(((o - r).abs_() <= bound).all())


def _compare_value(name: str, out: Any, ref: Any, tol: tuple[float, float]) -> Mismatch | None:
    if _is_number(out) and _is_number(ref) and not isinstance(ref, bool):
        o, r = float(out), float(ref)
        atol, rtol = tol if isinstance(ref, float) else EXACT
        if (math.isnan(o) and math.isnan(r)) or o == r:
            return None
        diff = abs(o - r)
        if math.isfinite(diff) and diff <= atol + rtol * abs(r):
            return None
        rel = diff / abs(r) if r != 0 and math.isfinite(diff) else math.inf
        return Mismatch(name, 1, 1, diff if math.isfinite(diff) else math.inf, rel, (((), o, r),))
    if out == ref:
        return None
    as_float = [float(v) if _is_number(v) else math.nan for v in (out, ref)]
    return Mismatch(name, 1, 1, math.inf, math.inf, (((), as_float[0], as_float[1]),))


def _first(mask: torch.Tensor, o: torch.Tensor, r: torch.Tensor, offset: int, n: int):
    idx = torch.nonzero(mask).reshape(-1)[:n].tolist()
    return [(offset + i, float(o[i]), float(r[i])) for i in idx]


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _tensor_rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    if out.is_complex() != ref.is_complex() or out.shape != ref.shape:
        return math.inf
    diff_sq, ref_sq = 0.0, 0.0
    for _, index in _runs(out):
        sums = _chunk_squares(out, ref, index)
        if sums is None:
            return math.inf
        diff_sq, ref_sq = diff_sq + sums[0], ref_sq + sums[1]
    if ref_sq == 0.0:
        return 0.0 if diff_sq == 0.0 else math.inf
    return math.sqrt(diff_sq) / math.sqrt(ref_sq)


def _chunk_squares(out: torch.Tensor, ref: torch.Tensor, index: tuple) -> list[float] | None:
    """[sum (out - ref)^2, sum ref^2] over one chunk, or None for a NaN/Inf that differs."""
    o = _chunk(out, index, out.device, torch.float64)
    r = _chunk(ref, index, out.device, torch.float64)
    both = torch.isfinite(o) & torch.isfinite(r)
    same_special = (torch.isnan(o) & torch.isnan(r)) | (~both & (o == r))
    if bool((~both & ~same_special).any()):
        return None
    diff = (o - r).masked_fill_(~both, 0.0).square_().sum()
    return torch.stack([diff, r.masked_fill(~both, 0.0).square_().sum()]).tolist()


def _chunk_errors(out: torch.Tensor, ref: torch.Tensor, index: tuple, floor: float):
    o = _chunk(out, index, out.device, torch.float64)
    r = _chunk(ref, index, out.device, torch.float64)
    # A non-finite |out - ref| set to 0 also zeroes its relative error: both are left out, and
    # every error is >= 0, so the maxima are those over the finite errors.
    diff = _finite_or_zero_((o - r).abs_())
    del o
    den = r.abs().clamp_min_(floor)
    rel = _finite_or_zero_(torch.div(diff, den, out=den))
    return torch.stack([diff.max(), rel.max()]).tolist()


def _chunk_has_bad(out: torch.Tensor, ref: torch.Tensor, index: tuple) -> bool:
    o = _chunk(out, index, out.device)
    bad = ~torch.isfinite(o)
    del o
    return bool((bad & torch.isfinite(_chunk(ref, index, out.device, out.dtype))).any())


def _same_leaf(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return _same_tensor_bits(x, y)
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return False
    return bool(x == y) or (_is_nan(x) and _is_nan(y))


def _same_tensor_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return all(
        torch.equal(_bytes(_chunk(a, index, a.device)), _bytes(_chunk(b, index, a.device)))
        for _, index in _runs(a)
    )


def _bytes(t: torch.Tensor) -> torch.Tensor:
    flat = t.resolve_neg().contiguous()
    return flat.view(torch.uint8) if flat.dtype != torch.bool else flat


def _runs(t: torch.Tensor) -> Iterator[tuple[int, tuple]]:
    """(flat offset, index) of the chunks of `t`, in row-major order, CHUNK_ELEMENTS at most
    each. A complex tensor is chunked as its real view (view_as_real: real and imaginary parts
    as a trailing dimension of 2), and the offsets count real elements. Callers fetch each chunk
    with `_chunk` inside a function of their own, so that one chunk's temporaries are gone
    before the next one is fetched."""
    pairs = 2 if t.is_complex() else 1
    for offset, index in _blocks(tuple(t.shape), max(1, CHUNK_ELEMENTS // pairs)):
        yield offset * pairs, index


def _chunk(
    t: torch.Tensor, index: tuple, device: torch.device, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """`t[index]` as a 1-d tensor on `device` (in `dtype` if given). A view of `t` where its
    layout, device and dtype allow, so callers never write into it; else a copy of this chunk
    alone (a transposed or expanded tensor is never copied whole)."""
    c = t.detach()[index].reshape(-1)
    if c.is_complex():
        c = torch.view_as_real(c.resolve_conj()).reshape(-1)
    return c.to(device=device, dtype=dtype or c.dtype)


def _blocks(
    shape: tuple[int, ...], limit: int, prefix: tuple = (), offset: int = 0
) -> Iterator[tuple[int, tuple]]:
    """(flat offset, index) pairs: `tensor[index]` is a row-major run of at most `limit`
    elements, and the runs cover a tensor of `shape` in order. Depends on the shape alone, so
    tensors of one shape and any strides are cut at the same elements."""
    numel = math.prod(shape)
    if numel == 0:
        return
    if numel <= limit:
        yield offset, prefix
        return
    inner = math.prod(shape[1:])
    if inner <= limit:  # whole rows of the leading dimension per block
        step = limit // inner
        for i in range(0, shape[0], step):
            yield offset + i * inner, (*prefix, slice(i, min(i + step, shape[0])))
        return
    for i in range(shape[0]):  # a row is too large: cut inside it
        yield from _blocks(shape[1:], limit, (*prefix, i), offset + i * inner)


def _finite_or_zero_(t: torch.Tensor) -> torch.Tensor:
    """`t` with its NaN and Inf elements set to 0, in place (no temporaries: torch.isfinite
    allocates |t| on the way, 9 bytes an element for float64)."""
    return t.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)


def _as_dtype(dtype) -> torch.dtype:
    from ..task import as_dtype

    return as_dtype(dtype)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float))  # bool included: it is an int


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _kind(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return type(v).__qualname__
    return type(v).__name__
