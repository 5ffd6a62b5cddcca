"""sandbox/judge/compare.py: structure before values, NaN rules, first bad indices, precision
policy."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from kernelwright.sandbox.crossing.outputs import storages_overlap
from kernelwright.sandbox.judge import compare as cmp
from kernelwright.sandbox.judge.compare import (
    TOLERANCES,
    check_structure,
    compare,
    error_stats,
    flatten_outputs,
    has_bad_values,
    mismatch_rule,
    precision_limit,
    rel_error,
    same_bits,
)


class LazyTensor(torch.Tensor):
    pass


# -- structure -------------------------------------------------------------------------------------


def test_flatten_outputs_names_every_leaf():
    a, b, c = torch.zeros(1), torch.ones(2), torch.ones(3)
    assert [name for name, _ in flatten_outputs(a)] == ["out"]
    leaves = flatten_outputs((a, [b, (c, 2.5)]))
    assert [name for name, _ in leaves] == ["out[0]", "out[1][0]", "out[1][1][0]", "out[1][1][1]"]
    assert leaves[2][1] is c and leaves[3][1] == 2.5


@pytest.mark.parametrize(
    ("out", "rule", "text"),
    [
        (torch.zeros(4, 3).as_subclass(LazyTensor), "output-type", "subclass"),
        (torch.nn.Parameter(torch.zeros(4, 3)), "output-type", "Parameter"),
        (torch.zeros(4, 3).to_sparse(), "output-type", "layout"),
        (torch.zeros(4, 3).numpy(), "output-type", "ndarray"),
        ((torch.zeros(4, 3),), "output-type", "tuple"),
        (torch.zeros(1, 3), "shape", "(1, 3)"),  # broadcastable: allclose would accept it
        (torch.zeros(3, 4), "shape", "(3, 4)"),
        (torch.zeros(4, 3, dtype=torch.float64), "dtype", "float64"),
        (torch.zeros(4, 3, device="meta"), "device", "meta"),
    ],
)
def test_check_structure_rules(out, rule, text):
    problem = check_structure(out, torch.zeros(4, 3))
    assert problem is not None and problem[0] == rule and text in problem[1], problem


def test_check_structure_nested():
    ref = (torch.zeros(2), [torch.zeros(3), 1.5])
    assert check_structure((torch.ones(2), [torch.ones(3), 2.0]), ref) is None
    assert check_structure([torch.ones(2), (torch.ones(3), 2)], ref) is None  # list ~ tuple
    rule, message = check_structure((torch.ones(2), [torch.ones(3)]), ref)
    assert rule == "shape" and "out[1] has 1 outputs, expected 2" in message
    rule, message = check_structure((torch.ones(2), [torch.ones(4), 2.0]), ref)
    assert rule == "shape" and message.startswith("out[1][0]")
    rule, _ = check_structure((torch.ones(2), [torch.ones(3), torch.tensor(2.0)]), ref)
    assert rule == "output-type"


# -- values ----------------------------------------------------------------------------------------


def test_equal_and_within_tolerance_pass():
    ref = torch.randn(64, 32)
    assert compare(ref.clone(), ref, torch.float32) is None
    assert compare(ref + 5e-5, ref, "fp32") is None
    assert compare(ref + 2e-3, ref, "fp32") is not None


def test_mismatch_counts_and_first_bad_indices():
    ref = torch.zeros(4, 5)
    out = ref.clone()
    bad = [(0, 3), (1, 0), (2, 2), (2, 4), (3, 1), (3, 4)]
    for i, j in bad:
        out[i, j] = 1.0 + i
    m = compare(out, ref, torch.float32)
    assert (m.output, m.count, m.total) == ("out", 6, 20)
    assert m.max_abs_err == 4.0
    assert [idx for idx, _, _ in m.first_bad] == bad[:5]
    assert m.first_bad[1] == ((1, 0), 2.0, 0.0)
    assert mismatch_rule(m) == "mismatch"


def test_first_bad_indices_across_chunks(monkeypatch):
    monkeypatch.setattr(cmp, "CHUNK_ELEMENTS", 7)
    ref = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    out = ref.clone()
    out[2, 3, 4] = -1.0
    out[1, 2, 0] = -1.0
    m = compare(out, ref, torch.float32)
    assert m.count == 2 and [i for i, _, _ in m.first_bad] == [(1, 2, 0), (2, 3, 4)]


def test_nan_where_the_reference_is_finite_is_rule_nan_and_listed_first():
    ref = torch.ones(10)
    out = ref.clone()
    out[1] = 5.0
    out[7] = float("nan")
    out[8] = float("inf")
    m = compare(out, ref, torch.float32)
    assert m.count == 3 and mismatch_rule(m) == "nan"
    assert [i for i, _, _ in m.first_bad] == [(7,), (8,), (1,)]
    assert math.isnan(m.first_bad[0][1])


def test_nan_and_inf_positions_must_match_exactly():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare(ref.clone(), ref, torch.float32) is None
    missing = ref.clone()
    missing[1] = 0.0  # the candidate lost a NaN the reference has
    m = compare(missing, ref, torch.float32)
    assert m.count == 1 and mismatch_rule(m) == "mismatch"
    flipped = ref.clone()
    flipped[2] = -float("inf")
    assert compare(flipped, ref, torch.float32).first_bad[0][0] == (2,)


def test_integer_outputs_are_exact_and_scalars_compare_by_value():
    ref = torch.tensor([1, 2, 3])
    assert compare(torch.tensor([1, 2, 4]), ref, torch.float32).count == 1
    assert compare((torch.ones(2), 0.5), (torch.ones(2), 0.5 + 1e-6), torch.float32) is None
    m = compare((torch.ones(2), 0.7), (torch.ones(2), 0.5), torch.float32)
    assert m.output == "out[1]" and m.first_bad == (((), 0.7, 0.5),)
    assert compare(3, 4, torch.float32).count == 1


def test_tolerances_are_one_table_per_dtype():
    assert TOLERANCES[torch.float32] == (1e-4, 1e-4)
    assert set(TOLERANCES) >= {torch.float32, torch.float16, torch.bfloat16}
    eps = {dt: torch.finfo(dt).eps for dt in (torch.float16, torch.bfloat16)}
    # looser by their epsilon: bf16's tolerance/eps is about fp16's
    ratio = [TOLERANCES[dt][1] / eps[dt] for dt in eps]
    assert 0.5 < ratio[0] / ratio[1] < 2


# -- relative error and the precision policy -------------------------------------------------------


def test_rel_error():
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert rel_error(torch.tensor([3.0, 4.5]), ref) == pytest.approx(0.1)
    assert rel_error(torch.zeros(3), torch.zeros(3, dtype=torch.float64)) == 0.0
    assert rel_error(torch.ones(3), torch.zeros(3, dtype=torch.float64)) == math.inf
    with_nan = torch.tensor([3.0, float("nan"), 4.0], dtype=torch.float64)
    assert rel_error(torch.tensor([3.0, float("nan"), 4.0]), with_nan) == 0.0
    assert rel_error(torch.tensor([3.0, 1.0, float("inf")]), with_nan) == math.inf
    nested = (torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.5]))
    assert rel_error(nested, (ref, ref)) == pytest.approx(0.1)


def tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to TF32 (10 explicit mantissa bits), round to nearest even."""
    bits = x.view(torch.int32)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return bits.view(torch.float32)


def fp32_blocked(a: torch.Tensor, b: torch.Tensor, block: int = 64) -> torch.Tensor:
    """An honest fp32 kernel: a K loop accumulating fp32 partial products, like a Triton GEMM."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in range(0, a.shape[1], block):
        acc += a[:, k : k + block] @ b[k : k + block]
    return acc


def low_precision_accumulated(a, b, dtype, block: int = 32) -> torch.Tensor:
    """fp32 products per block, but the running sum kept in `dtype` (fp16 accumulation)."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=dtype)
    for k in range(0, a.shape[1], block):
        acc = (acc.float() + a[:, k : k + block].float() @ b[k : k + block].float()).to(dtype)
    return acc


@pytest.fixture(scope="module")
def gemm():
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(128, 4096, generator=gen)  # torch.rand: the case where allclose is fooled
    b = torch.rand(4096, 128, generator=gen)
    ref64 = a.double() @ b.double()
    eager = a @ b
    return a, b, ref64, eager


def test_tf32_gemm_passes_allclose_but_fails_strict_precision(gemm):
    a, b, ref64, eager = gemm
    candidate = (tf32(a).double() @ tf32(b).double()).float()  # TF32 products, exact sums
    assert compare(candidate, eager, torch.float32) is None  # the premise
    limit = precision_limit(rel_error(eager, ref64), torch.float32, "strict")
    assert rel_error(candidate, ref64) > limit
    assert rel_error(candidate, ref64) <= precision_limit(
        rel_error(eager, ref64), torch.float32, "tf32-ok"
    )


def test_fp16_compute_fails_strict_precision_in_an_fp32_run(gemm):
    a, b, ref64, eager = gemm
    candidate = (a.half().float() @ b.half().float()).float()
    limit = precision_limit(rel_error(eager, ref64), torch.float32, "strict")
    assert rel_error(candidate, ref64) > limit
    fp16_acc = low_precision_accumulated(a, b, torch.float16).float()
    assert rel_error(fp16_acc, ref64) > limit


def test_honest_fp32_reordering_passes_strict_precision(gemm):
    a, b, ref64, eager = gemm
    limit = precision_limit(rel_error(eager, ref64), torch.float32, "strict")
    for block in (16, 64, 512):
        candidate = fp32_blocked(a, b, block)
        assert compare(candidate, eager, torch.float32) is None
        assert rel_error(candidate, ref64) <= limit


def test_fp16_accumulation_fails_in_an_fp16_run():
    gen = torch.Generator().manual_seed(1)
    a = torch.rand(64, 8192, generator=gen).half()
    b = torch.rand(8192, 64, generator=gen).half()
    ref64 = a.double() @ b.double()
    eager = (a.float() @ b.float()).half()  # what cuBLAS does: fp32 accumulator, fp16 output
    limit = precision_limit(rel_error(eager, ref64), torch.float16, "strict")
    fp32_acc = low_precision_accumulated(a, b, torch.float32).half()
    assert rel_error(fp32_acc, ref64) <= limit
    assert rel_error(low_precision_accumulated(a, b, torch.float16), ref64) > limit


def test_precision_limit_floor_and_factor():
    assert precision_limit(0.0, torch.float32) == cmp.PRECISION_FLOOR[torch.float32]
    assert precision_limit(1e-3, "fp32") == pytest.approx(cmp.PRECISION_FACTOR * 1e-3)
    assert precision_limit(0.0, torch.float32, "tf32-ok") == 2.0**-10
    assert precision_limit(0.0, torch.float16, "tf32-ok") == cmp.PRECISION_FLOOR[torch.float16]
    with pytest.raises(ValueError, match="unknown precision policy"):
        precision_limit(0.0, torch.float32, "loose")


# -- helpers the worker needs ----------------------------------------------------------------------


def test_storages_overlap():
    base = torch.zeros(10, 10)
    assert storages_overlap(base[2:4], base)
    assert storages_overlap(base[:2], base[5:])  # disjoint views of one buffer still share it
    assert storages_overlap(base.t(), base.view(-1))
    assert not storages_overlap(base.clone(), base)
    assert not storages_overlap(torch.zeros(0), base)


def test_same_bits():
    x = torch.tensor([1.0, float("nan"), -0.0])
    assert same_bits(x, x.clone())
    assert not same_bits(x, torch.tensor([1.0, float("nan"), 0.0]))  # -0.0 is not 0.0
    assert not same_bits(x, x.double())
    assert not same_bits(x, x[:2])
    assert same_bits((x, 2.0), (x.clone(), 2.0)) and not same_bits((x, 2.0), (x, 3.0))
    assert same_bits(torch.tensor(True), torch.tensor(True))
    assert same_bits(x.t(), x.clone())
    y = torch.randn(3, 4)
    assert same_bits(y.t(), y.t().contiguous())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_the_float32_fast_path_agrees_with_the_exact_rule_at_the_edge(dtype):
    atol, rtol = TOLERANCES[dtype]
    ref = (torch.randn(10_000, dtype=torch.float64) * 3).to(dtype)
    bound = atol + rtol * ref.double().abs()
    for factor, fails in ((0.5, False), (0.99, False), (1.02, True)):
        out = (ref.double() + factor * bound).to(dtype)
        exact_bad = int(((out.double() - ref.double()).abs() > bound).sum())
        m = compare(out, ref, dtype)
        assert (m is not None) == (exact_bad > 0), (factor, m)
        if fails:
            assert exact_bad > 0 and m.count == exact_bad
    # A NaN or Inf never passes the fast path: the exact path places them.
    nan_out = ref.clone()
    nan_out[7] = float("nan")
    assert compare(nan_out, ref, dtype).first_bad[0][0] == (7,)


def _blocked_cumsum(x: torch.Tensor, block: int = 128) -> torch.Tensor:
    """fp32 cumsum in another order (in-block scans plus carried block totals), as a kernel does."""
    rows, n = x.shape
    inner = torch.cumsum(x.view(rows, n // block, block), 2)
    carry = torch.cumsum(inner[:, :, -1], 1) - inner[:, :, -1]
    return (inner + carry[:, :, None]).view(rows, n)


def test_ill_conditioned_output_is_judged_against_float64():
    """A long cumsum: eager and an equally accurate kernel differ past 1e-4 near zero crossings."""
    x = torch.randn(64, 16384, generator=torch.Generator().manual_seed(0)) * 100
    eager, out, ref64 = torch.cumsum(x, 1), _blocked_cumsum(x), torch.cumsum(x.double(), 1)
    assert compare(out, eager, torch.float32) is not None  # allclose alone calls it wrong
    assert compare(out, eager, torch.float32, ref64=ref64) is None
    # A wrong element is still wrong: far past eager's worst error against float64 (~2e-3).
    wrong = out.clone()
    wrong[3, 5000] += 1.0
    m = compare(wrong, eager, torch.float32, ref64=ref64)
    assert m is not None and m.count == 1 and m.first_bad[0][0] == (3, 5000)
    # So is a stale half: the float64 widening is eager's worst error, not the output's scale.
    half = out.clone()
    half[:, 8192:] = 0.0
    assert compare(half, eager, torch.float32, ref64=ref64).count > 64 * 8000


def test_float64_widening_needs_a_float64_reference_of_the_same_shape():
    eager = torch.tensor([1.0, 2.0, 3.0])
    out = torch.tensor([1.0, 2.0, 3.1])
    assert compare(out, eager, torch.float32, ref64=torch.zeros(2, dtype=torch.float64)).count == 1
    exact = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    assert compare(out, eager, torch.float32, ref64=exact).count == 1  # eager is exact here


# -- chunks: bounded temporaries, the same answers -------------------------------------------------

WHOLE = 1 << 40  # a chunk larger than any tensor here: the unchunked computation
CHUNKS = (1, 5, 7, 64)


def _layouts(shape: tuple[int, ...], seed: int) -> dict[str, torch.Tensor]:
    """The same kind of values of `shape` in several layouts: contiguous, transposed, strided,
    expanded."""
    g = torch.Generator().manual_seed(seed)
    flipped = torch.randn(tuple(reversed(shape)), generator=g).permute(
        tuple(reversed(range(len(shape))))
    )
    wide = torch.randn(tuple(2 * n for n in shape), generator=g)
    strided = wide[tuple(slice(None, None, 2) for _ in shape)]
    base = torch.randn((1,) * len(shape), generator=g).expand(shape) if shape else None
    layouts = {"contiguous": torch.randn(shape, generator=g), "transposed": flipped}
    layouts["strided"] = strided
    if base is not None:
        layouts["expanded"] = base
    return layouts


def _perturbed(ref: torch.Tensor, seed: int, specials: bool) -> torch.Tensor:
    """`ref` in another layout (transposed where it has 2+ dims) with some elements off by
    1e-3 (past fp32's 1e-4) and, with `specials`, NaN and Inf where ref is finite."""
    g = torch.Generator().manual_seed(seed)
    out = ref.clone()
    if out.dim() >= 2:
        out = out.transpose(0, -1).contiguous().transpose(0, -1)  # same values, other strides
    flat = out.view(-1) if out.is_contiguous() else None
    n = ref.numel()
    picks = torch.randperm(n, generator=g)[: max(1, n // 4)]
    bumps = torch.zeros(n)
    bumps[picks] = 1e-3 * (1 + torch.rand(len(picks), generator=g))
    out += bumps.view(ref.shape)
    if specials and n >= 3:
        idx = [_unravel_test(int(i), ref.shape) for i in picks[:2]]
        out[idx[0]] = float("nan")
        out[idx[1]] = float("-inf")
    del flat
    return out


def _unravel_test(flat: int, shape) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _chunked(monkeypatch, chunk: int, fn, *args):
    monkeypatch.setattr(cmp, "CHUNK_ELEMENTS", chunk)
    return fn(*args)


SHAPES = [(3, 5, 7), (13,), (1, 1), (2, 1, 17), (4, 33), ()]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("specials", [False, True], ids=["finite", "nan-inf"])
def test_chunked_compare_equals_the_unchunked_answer(monkeypatch, shape, specials):
    for k, (layout, ref) in enumerate(_layouts(shape, seed=len(shape)).items()):
        out = _perturbed(ref, seed=k, specials=specials)
        ref64 = ref.double() + 1e-9
        for r64 in (None, ref64):
            whole = _chunked(monkeypatch, WHOLE, compare, out, ref, torch.float32, r64)
            assert whole is not None, (layout, "the perturbation must fail fp32's tolerance")
            for chunk in CHUNKS:
                got = _chunked(monkeypatch, chunk, compare, out, ref, torch.float32, r64)
                assert repr(got) == repr(whole), (layout, chunk, r64 is not None)


def test_chunked_compare_matches_a_plain_torch_count_and_first_indices(monkeypatch):
    ref = torch.randn(7, 11, 13).permute(2, 0, 1)  # (13, 7, 11), non-contiguous
    out = _perturbed(ref, seed=3, specials=False)
    o, r = out.double(), ref.double()
    bad = (o - r).abs() > 1e-4 + 1e-4 * r.abs()
    expected_first = [tuple(i) for i in torch.nonzero(bad)[:5].tolist()]
    for chunk in CHUNKS:
        m = _chunked(monkeypatch, chunk, compare, out, ref, torch.float32)
        assert m.count == int(bad.sum()) and m.total == ref.numel()
        assert [i for i, _, _ in m.first_bad] == expected_first
        assert m.max_abs_err == float((o - r).abs().max())


def test_chunked_compare_finds_an_introduced_nan_in_the_last_chunk_first(monkeypatch):
    ref = torch.randn(5, 9)
    out = ref.clone()
    out[0, 1] += 1.0
    out[4, 8] = float("nan")
    m = _chunked(monkeypatch, 4, compare, out, ref, torch.float32)
    assert m.count == 2 and m.first_bad[0][0] == (4, 8) and mismatch_rule(m) == "nan"


def test_chunked_compare_of_complex_and_conjugated_outputs(monkeypatch):
    ref = torch.randn(3, 7, dtype=torch.complex64)
    out = ref.clone()
    out[1, 2] += 1j
    out[2, 6] += 1.0
    conj = out.conj().resolve_conj().conj()  # the same values behind a conjugate bit
    whole = _chunked(monkeypatch, WHOLE, compare, out, ref, torch.float32)
    assert whole.count == 2 and whole.total == 42
    assert [i for i, _, _ in whole.first_bad] == [(1, 2, 1), (2, 6, 0)]
    for chunk in CHUNKS:
        assert repr(_chunked(monkeypatch, chunk, compare, conj, ref, torch.float32)) == repr(whole)
        assert _chunked(monkeypatch, chunk, same_bits, conj, out)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_chunked_rel_error_equals_the_unchunked_answer(monkeypatch, shape):
    for k, ref in enumerate(_layouts(shape, seed=1).values()):
        out = _perturbed(ref, seed=k, specials=False)
        r64 = ref.double().transpose(0, -1) if ref.dim() >= 2 else ref.double()
        r64 = r64.contiguous().transpose(0, -1) if ref.dim() >= 2 else r64
        plain = float((out.double() - r64).norm() / r64.norm())
        for chunk in (WHOLE, *CHUNKS):
            got = _chunked(monkeypatch, chunk, rel_error, out, r64)
            assert got == pytest.approx(plain, rel=1e-12)
    special = torch.tensor([1.0, float("nan"), 2.0])
    assert _chunked(monkeypatch, 1, rel_error, special, special.double()) == 0.0
    assert _chunked(monkeypatch, 1, rel_error, special, torch.ones(3).double()) == math.inf


def test_chunked_same_bits_sees_one_flipped_bit_anywhere(monkeypatch):
    base = torch.randn(6, 10, 7)
    view = base[::2, 1::3].transpose(0, 2)  # (7, 3, 3), strided
    copy = view.contiguous()
    monkeypatch.setattr(cmp, "CHUNK_ELEMENTS", 5)
    assert same_bits(view, copy)
    for i in (0, copy.numel() // 2, copy.numel() - 1):
        flipped = copy.clone()
        bits = flipped.view(-1).view(torch.int32)
        bits[i] ^= 1  # one ulp
        assert not same_bits(view, flipped), i
    assert not same_bits(torch.zeros(9), -torch.zeros(9))
    assert same_bits(-torch.ones(9), torch.ones(9).neg())  # a neg-bit view is resolved
    assert same_bits(torch.ones(9)._neg_view(), -torch.ones(9))


def _old_error_stats(out, ref, dtype):
    """The worker's inline computation before it moved here (whole-tensor float64)."""
    diff = (out.double() - ref.double()).abs()

    def finite_max(t):
        t = t[torch.isfinite(t)]
        return float(t.max()) if t.numel() else 0.0

    atol, rtol = TOLERANCES[dtype]
    floor = atol / rtol if rtol else 1.0
    return finite_max(diff), finite_max(diff / ref.double().abs().clamp_min(floor))


def _old_has_bad_values(out, ref):
    if not out.is_floating_point():
        return False
    return bool((~torch.isfinite(out) & torch.isfinite(ref.to(out.dtype))).any())


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_error_stats_and_bad_values_equal_the_whole_tensor_formulas(monkeypatch, shape, dtype):
    for k, ref in enumerate(_layouts(shape, seed=2).values()):
        ref = ref.to(dtype)
        for specials in (False, True):
            out = _perturbed(ref.float(), seed=k, specials=specials).to(dtype)
            expected = _old_error_stats(out, ref, dtype)
            bad = _old_has_bad_values(out, ref)
            assert bad == (specials and ref.numel() >= 3)
            for chunk in (WHOLE, *CHUNKS):
                assert _chunked(monkeypatch, chunk, error_stats, out, ref, dtype) == expected
                assert _chunked(monkeypatch, chunk, has_bad_values, out, ref) == bad


def test_error_stats_leave_out_non_finite_errors_and_floor_small_references():
    ref = torch.tensor([0.0, 1e-9, 2.0, float("inf"), 1.0])
    out = torch.tensor([1e-5, 2e-5, 2.5, float("inf"), float("nan")])
    max_abs, max_rel = error_stats(out, ref, torch.float32)
    assert max_abs == pytest.approx(0.5)
    assert max_rel == pytest.approx(0.25)  # 1e-5 / floor 1 (= atol/rtol) is below 0.5 / 2
    assert error_stats(torch.full((3,), float("nan")), torch.ones(3), torch.float32) == (0.0, 0.0)
    assert not has_bad_values(torch.tensor([1, 2]), torch.tensor([1, 2]))  # integers: never
    assert not has_bad_values(torch.tensor([float("inf")]), torch.tensor([float("inf")]))
    # A float64 reference beyond fp16's range is Inf in the output's dtype: not introduced.
    assert not has_bad_values(torch.tensor([float("inf")]).half(), torch.tensor([1e6]).double())


def test_a_reference_on_another_device_moves_one_chunk_at_a_time(monkeypatch):
    """Emulated on CPU: every `.to(device=...)` the comparisons make is recorded, and none may
    carry more than a chunk (a float64 reference kept on the host must never move whole)."""
    moved: list[int] = []
    real_to = torch.Tensor.to

    def recording_to(self, *args, **kwargs):
        if "device" in kwargs or any(isinstance(a, (torch.device, str)) for a in args):
            moved.append(self.numel())
        return real_to(self, *args, **kwargs)

    ref = torch.randn(12, 11).t()
    out = _perturbed(ref, seed=5, specials=True)
    ref64 = ref.double()
    expected = (
        repr(compare(out, ref, torch.float32, ref64)),
        rel_error(out, ref64),
        error_stats(out, ref64, torch.float32),
        has_bad_values(out, ref64),
        same_bits(ref64, ref.double()),
    )
    monkeypatch.setattr(cmp, "CHUNK_ELEMENTS", 8)
    monkeypatch.setattr(torch.Tensor, "to", recording_to)
    got = (
        repr(compare(out, ref, torch.float32, ref64)),
        rel_error(out, ref64),
        error_stats(out, ref64, torch.float32),
        has_bad_values(out, ref64),
        same_bits(ref64, ref.double()),
    )
    monkeypatch.undo()
    assert got[0] == expected[0] and got[2:] == expected[2:]
    assert got[1] == pytest.approx(expected[1], rel=1e-12)
    assert moved and max(moved) <= 8, max(moved)
    assert len(moved) >= 5 * ref.numel() // 8  # per chunk, for each of the five helpers


@pytest.mark.gpu
def test_a_float64_reference_on_the_host_judges_a_gpu_output():
    ref = torch.randn(300, 257, device="cuda")
    out = _perturbed(ref.cpu(), seed=7, specials=True).cuda()
    host64 = ref.double().cpu()
    assert repr(compare(out, ref, torch.float32, host64)) == repr(
        compare(out.cpu(), ref.cpu(), torch.float32, host64)
    )
    assert rel_error(out, host64) == pytest.approx(rel_error(out.cpu(), host64), rel=1e-12)
    assert error_stats(out, host64, torch.float32) == error_stats(out.cpu(), host64, torch.float32)
    assert has_bad_values(out, host64) and same_bits(ref.double(), host64)


# Measures the peak resident memory of the comparisons in a fresh interpreter. With
# MALLOC_MMAP_THRESHOLD_ every block above 64 KiB is mmapped and unmapped on free, so the high-water
# mark is what was live at once, not what glibc kept around.
_PEAK = """
import torch
from kernelwright.sandbox.judge import compare as cmp

def peak_delta(fn):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = _status("VmHWM")
    fn()
    return _status("VmHWM") - before

def _status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

cmp.CHUNK_ELEMENTS = 1 << 18
g = torch.Generator().manual_seed(0)
ref = torch.randn(1024, 8192, generator=g).t()  # 32 MB of fp32, transposed
out = ref + 1e-3 * torch.randn(ref.shape, generator=g)
ref64 = ref.double()
copy64 = ref64.clone()
out[5, 7] = float("nan")
calls = {
    "compare": lambda: cmp.compare(out, ref, torch.float32, ref64=ref64),
    "rel_error": lambda: cmp.rel_error(out, ref64),
    "error_stats": lambda: cmp.error_stats(out, ref, torch.float32),
    "has_bad_values": lambda: cmp.has_bad_values(out, ref),
    "same_bits": lambda: cmp.same_bits(ref64, copy64),
}
for name, fn in calls.items():
    print(name, peak_delta(fn))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux /proc needed")
@pytest.mark.slow
def test_comparisons_hold_one_chunk_of_temporaries_not_the_tensor():
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PEAK)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    peaks = {
        name: int(value)
        for name, value in (line.split() for line in proc.stdout.split("\n") if line)
    }
    # One 2^18-element chunk: ~44 bytes an element at most (11.5 MB), plus slack for the
    # interpreter. Whole-tensor float64 temporaries of these 8M elements would be 64 MB each.
    assert set(peaks) == {"compare", "rel_error", "error_stats", "has_bad_values", "same_bits"}
    for name, peak in peaks.items():
        assert peak < 24 * 2**20, (name, peak / 2**20)


def _checker():
    """Evaluation.check_output's state, without a judge around it."""
    from types import SimpleNamespace

    return SimpleNamespace(
        torch=torch,
        ctx=SimpleNamespace(dtype=torch.float32),
        config=SimpleNamespace(precision="strict"),
        w=SimpleNamespace(cuda=False),
        edge_elements=0,
        max_abs=0.0,
        max_rel=0.0,
        mismatch=None,
        err64=None,
        eager64=None,
        limit64=None,
        eager64_of={},
    )


def _off_by(ref64: torch.Tensor, rel: float) -> torch.Tensor:
    """ref64 in fp32 with a relative L2 error of about `rel` (one element moved)."""
    out = ref64.clone()
    out[0] += rel * float(ref64.norm())
    return out.float()


def test_the_precision_limit_reads_eagers_worst_error_on_the_output_so_far():
    # A per-row loss over 6 rows: eager's error on one draw fell to 4.0e-7 where an honest
    # kernel's was 1.6e-6 (4.03x, past the factor of 4). Against eager's worst error on that
    # output over the draws checked before, the honest kernel passes; TF32's 22x does not.
    from kernelwright.sandbox.judge.evaluation import Evaluation
    from kernelwright.sandbox.judge.verdict import Verdict

    ref64 = torch.tensor([0.9, 0.0, 0.31, 0.0, 0.0, 0.05], dtype=torch.float64)
    ev = _checker()
    Evaluation.check_output(ev, _off_by(ref64, 2e-6), _off_by(ref64, 1e-6), ref64, "trial 1")
    Evaluation.check_output(ev, _off_by(ref64, 3e-6), ref64.float(), ref64, "call 2")
    with pytest.raises(Verdict) as refused:
        Evaluation.check_output(ev, _off_by(ref64, 5e-5), ref64.float(), ref64, "call 3")
    assert refused.value.rule == "precision"
    # Each output and shape keeps its own worst: a fresh one is judged on its own eager.
    fresh = _checker()
    with pytest.raises(Verdict):
        Evaluation.check_output(fresh, _off_by(ref64, 3e-6), ref64.float(), ref64, "call 1")
