"""Compare a candidate's outputs with the reference: structure, values, NaN/Inf and precision."""

from __future__ import annotations

import math
from typing import Any

import torch

from .results import Mismatch

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
POLICIES = ("strict", "tf32-ok")
# Under the Triton interpreter (CPU) fp32 -> bf16 conversions truncate instead of rounding to
# nearest (triton 3.7: 2.0409 is stored as 2.03125 where torch gives 2.046875; fp16 rounds
# correctly): an honest bf16 kernel's outputs carry up to one more bf16 ulp (2^-7 relative) than
# on a GPU, where it is judged without this.
INTERPRETER_BF16_SLACK = 2.0**-7

# Elements compared per slice: bounds the float64 temporaries to a few hundred MB on the device.
_CHUNK = 1 << 24
_MAX_FIRST_BAD = 5


def flatten_outputs(out: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """Leaves of a (nested) output with their paths: [("out[0]", t0), ("out[1][2]", x), ...]."""
    if isinstance(out, (tuple, list)):
        return [leaf for i, v in enumerate(out) for leaf in flatten_outputs(v, f"{prefix}[{i}]")]
    if isinstance(out, dict):
        return [leaf for k, v in out.items() for leaf in flatten_outputs(v, f"{prefix}[{k!r}]")]
    return [(prefix, out)]


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


def compare(out: Any, ref: Any, dtype, ref64: Any = None) -> Mismatch | None:
    """How `out` differs from `ref` beyond the tolerance of `dtype`, or None when it does not.

    Full-tensor, in float64 on the reference's device. NaN and Inf must sit at the same positions
    with the same signs; a NaN or Inf in `out` where `ref` is finite is reported first (see
    `mismatch_rule`). Assumes `check_structure(out, ref)` passed; nested outputs are compared leaf
    by leaf and the first differing leaf is reported. Non-tensor leaves compare by value.

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
    """
    refs64 = flatten_outputs(ref64) if ref64 is not None else None
    for k, ((name, o), (_, r)) in enumerate(zip(flatten_outputs(out), flatten_outputs(ref))):
        if isinstance(r, torch.Tensor):
            r64 = refs64[k][1] if refs64 is not None and k < len(refs64) else None
            if not isinstance(r64, torch.Tensor) or not r.dtype.is_floating_point:
                r64 = None
            m = _compare_tensor(name, o, r, tolerance(dtype, r.dtype), r64)
        else:
            m = _compare_value(name, o, r, tolerance(dtype, torch.float64))
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


def precision_limit(
    eager_err: float, dtype, policy: str = "strict", *, interpreter: bool = False
) -> float:
    """The largest relative error vs float64 a candidate may have (see PRECISION_FACTOR);
    `interpreter`: its outputs come from the Triton interpreter (INTERPRETER_BF16_SLACK)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown precision policy {policy!r}; expected one of {POLICIES}")
    dtype = _as_dtype(dtype)
    floor = PRECISION_FLOOR[dtype]
    if policy == "tf32-ok" and dtype == torch.float32:
        floor = TF32_FLOOR
    limit = max(PRECISION_FACTOR * eager_err, floor)
    if interpreter and dtype == torch.bfloat16:
        limit += INTERPRETER_BF16_SLACK
    return limit


def storages_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the storages under `a` and `b` share any byte (views of one buffer do)."""
    if a.device != b.device or a.device.type == "meta":
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def same_bits(a: Any, b: Any) -> bool:
    """Bitwise equality of two outputs (nested allowed): NaN equals the same NaN, -0.0 != 0.0."""
    leaves_a, leaves_b = flatten_outputs(a), flatten_outputs(b)
    if len(leaves_a) != len(leaves_b):
        return False
    return all(_same_leaf(x, y) for (_, x), (_, y) in zip(leaves_a, leaves_b))


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
    if ref.is_complex():  # real and imaginary parts as a trailing dimension of 2
        out, ref = torch.view_as_real(out.resolve_conj()), torch.view_as_real(ref.resolve_conj())
        ref64 = None
    atol, rtol = tol
    if _surely_within(out, ref, atol, rtol):
        return None
    o_flat = out.detach().to(ref.device).reshape(-1)
    r_flat = ref.detach().reshape(-1)
    e_flat, slack = None, 0.0
    if ref64 is not None and ref64.shape == ref.shape:
        e_flat = ref64.detach().to(ref.device).reshape(-1)
        slack = PRECISION_FACTOR * _worst_error(r_flat, e_flat)
    count, max_abs, max_rel = 0, 0.0, 0.0
    nonfinite: list[tuple[int, float, float]] = []
    other: list[tuple[int, float, float]] = []
    for start in range(0, r_flat.numel(), _CHUNK):
        o = _as_float64(o_flat[start : start + _CHUNK])
        r = _as_float64(r_flat[start : start + _CHUNK])
        both = torch.isfinite(o) & torch.isfinite(r)
        diff = torch.where(both, (o - r).abs(), torch.zeros_like(o))
        same_special = (torch.isnan(o) & torch.isnan(r)) | (~both & (o == r))
        special_bad = ~both & ~same_special
        bad = special_bad | (both & (diff > atol + rtol * r.abs()))
        if e_flat is not None and math.isfinite(slack) and bool(bad.any()):
            e = _as_float64(e_flat[start : start + _CHUNK])
            near_exact = (o - e).abs() <= atol + rtol * e.abs() + slack
            bad &= ~(both & torch.isfinite(e) & near_exact)
        n_bad = int(bad.sum())
        if diff.numel():
            max_abs = max(max_abs, float(diff.max()))
            meaningful = both & (r.abs() > atol)  # relative error where |expected| > atol
            if bool(meaningful.any()):
                max_rel = max(max_rel, float((diff[meaningful] / r[meaningful].abs()).max()))
        if n_bad == 0:
            continue
        count += n_bad
        introduced = special_bad & ~torch.isfinite(o) & torch.isfinite(r)
        if len(nonfinite) < _MAX_FIRST_BAD:
            nonfinite += _first(introduced, o, r, start, _MAX_FIRST_BAD - len(nonfinite))
        if len(other) < _MAX_FIRST_BAD:
            other += _first(bad & ~introduced, o, r, start, _MAX_FIRST_BAD - len(other))
    if count == 0:
        return None
    first = (nonfinite + other)[:_MAX_FIRST_BAD]
    shape = tuple(ref.shape)
    return Mismatch(
        output=name,
        count=count,
        total=r_flat.numel(),
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        first_bad=tuple((_unravel(i, shape), got, exp) for i, got, exp in first),
    )


def _worst_error(ref: torch.Tensor, ref64: torch.Tensor) -> float:
    """max |ref - ref64| over the elements where both are finite (eager's worst error)."""
    worst = 0.0
    for start in range(0, ref.numel(), _CHUNK):
        r = _as_float64(ref[start : start + _CHUNK])
        e = _as_float64(ref64[start : start + _CHUNK])
        both = torch.isfinite(r) & torch.isfinite(e)
        if bool(both.any()):
            worst = max(worst, float((r[both] - e[both]).abs().max()))
    return worst


# The fast path's margin: far above float32's rounding of |out - ref| and of the bound (~1e-7
# relative), so a pass there is a pass in exact arithmetic.
_FAST_MARGIN = 1.0 - 1e-5


def _surely_within(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """A sufficient test in float32, a few passes over the data instead of the float64 slices:
    True only when every element is finite and within tolerance; NaN, Inf and anything near the
    edge go the exact way (which also finds the first bad elements)."""
    if ref.dtype not in (torch.float32, torch.float16, torch.bfloat16) or not atol + rtol:
        return False
    o = out.detach().to(device=ref.device, dtype=torch.float32)
    r = ref.detach().to(torch.float32)
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
    return Mismatch(name, 1, 1, math.inf, math.inf, (((), *as_float),))


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
    if ref.is_complex() or out.is_complex():
        out, ref = torch.view_as_real(out.resolve_conj()), torch.view_as_real(ref.resolve_conj())
    o_flat = out.detach().to(ref.device).reshape(-1)
    r_flat = ref.detach().reshape(-1)
    if o_flat.numel() != r_flat.numel():
        return math.inf
    diff_sq, ref_sq = 0.0, 0.0
    for start in range(0, r_flat.numel(), _CHUNK):
        o = _as_float64(o_flat[start : start + _CHUNK])
        r = _as_float64(r_flat[start : start + _CHUNK])
        both = torch.isfinite(o) & torch.isfinite(r)
        same_special = (torch.isnan(o) & torch.isnan(r)) | (~both & (o == r))
        if bool((~both & ~same_special).any()):
            return math.inf
        diff_sq += float(torch.where(both, o - r, torch.zeros_like(o)).square().sum())
        ref_sq += float(torch.where(both, r, torch.zeros_like(r)).square().sum())
    if ref_sq == 0.0:
        return 0.0 if diff_sq == 0.0 else math.inf
    return math.sqrt(diff_sq) / math.sqrt(ref_sq)


def _same_leaf(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return _same_tensor_bits(x, y)
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return False
    return bool(x == y) or (_is_nan(x) and _is_nan(y))


def _same_tensor_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device != b.device:
        b = b.to(a.device)
    if a.is_complex():
        a, b = torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj())
    return torch.equal(_bytes(a.resolve_neg()), _bytes(b.resolve_neg()))


def _bytes(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1).contiguous()
    return flat.view(torch.uint8) if flat.dtype != torch.bool else flat


def _as_float64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float64)


def _as_dtype(dtype) -> torch.dtype:
    from .task import as_dtype

    return as_dtype(dtype)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float))  # bool included: it is an int


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _kind(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return type(v).__qualname__
    return type(v).__name__
