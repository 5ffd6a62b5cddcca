"""sandbox/judge/roofline.py: counting bytes and FLOPs, the bound, the impossibility test, the
cache."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
import torch
from torch import nn

from kernelwright.sandbox.judge import roofline as rl
from kernelwright.sandbox.judge.roofline import (
    IMPOSSIBLE_FACTOR,
    Ceilings,
    count_work,
    fraction,
    is_impossible,
    measure_ceilings,
    roofline,
)

H200_LIKE = Ceilings(
    device="cuda:0",
    bandwidth_gbps=4000.0,
    peak_tflops={"fp32": 400.0, "fp16": 800.0, "bf16": 800.0},
    key="test",
)


def test_count_work_linear():
    model = nn.Linear(64, 32)
    x = torch.randn(8, 64)
    with torch.no_grad():
        out = model(x)
    nbytes, flops = count_work(model, [x], out)
    assert flops == 2 * 8 * 64 * 32  # one multiply-add per weight per row
    assert nbytes == 4 * (8 * 64 + 64 * 32 + 32 + 8 * 32)  # x, weight, bias read; out written


def test_count_work_conv_in_half_precision_with_a_shared_input():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, groups=2, bias=False)

        def forward(self, x, y):
            return self.conv(x) + self.conv(y)

    model = Twice().half()
    x = torch.randn(2, 4, 10, 10).half()
    out = model(x, x)
    nbytes, flops = count_work(model, [x, x], out)
    per_conv = 2 * (2 * 8 * 8 * 8) * (4 // 2) * 3 * 3  # 2 * out elements * (Cin/groups) * k*k
    assert flops == 2 * per_conv
    assert nbytes == 2 * (x.numel() + model.conv.weight.numel() + out.numel())  # x counted once


def test_count_work_leaves_running_statistics_alone():
    model = nn.Sequential(nn.Linear(16, 16), nn.BatchNorm1d(16))
    x = torch.randn(32, 16)
    out = model(x)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    count_work(model, [x], out)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_roofline_memory_and_compute_bound():
    mem = roofline(8 * 10**9, 10**9, "fp32", H200_LIKE)  # 8 GB, 1 GFLOP
    assert mem.limiter == "memory" and mem.bound_ms == pytest.approx(2.0)
    gemm = roofline(10**8, 2 * 8192**3, torch.bfloat16, H200_LIKE)
    assert gemm.limiter == "compute"
    assert gemm.bound_ms == pytest.approx(2 * 8192**3 / 800e12 * 1e3)
    assert gemm.peak_tflops == 800.0 and gemm.bandwidth_gbps == 4000.0
    assert roofline(0, 2 * 8192**3, "fp32", H200_LIKE).bound_ms == pytest.approx(2 * gemm.bound_ms)
    assert fraction(2.0, 4.0) == 0.5 and fraction(2.0, 0.0) is None


def test_strict_fp32s_fraction_is_of_the_fastest_legal_arithmetic():
    # TF32 products are not fp32-strict; tf32x3's three per product are: a strict kernel is
    # judged against TF32's rate / 3, and only the device's fastest rate bounds what is possible.
    gemm = 2 * 8192**3
    strict = roofline(10**8, gemm, "fp32", H200_LIKE)
    assert strict.bound_ms == pytest.approx(gemm / 400e12 * 1e3)  # no time may beat TF32's
    assert strict.policy_tflops == pytest.approx(400.0 / 3)
    assert strict.policy_ms == pytest.approx(3 * strict.bound_ms)
    assert "tf32x3" in strict.policy and strict.limiter == "compute"
    loose = roofline(10**8, gemm, "fp32", H200_LIKE, precision="tf32-ok")
    assert loose.policy_ms == pytest.approx(loose.bound_ms) and loose.policy_tflops == 400.0
    # cuBLAS's exact SGEMM, where it is faster than tf32x3 can be, is the strict ceiling.
    simt = Ceilings(
        device="cuda:0", bandwidth_gbps=4000.0, peak_tflops={"fp32": 120.0, "fp32-ieee": 60.0}
    )
    assert roofline(0, gemm, "fp32", simt).policy_tflops == 60.0
    assert "exact fp32" in roofline(0, gemm, "fp32", simt).policy
    # 16-bit inputs and memory-bound work: one floor.
    half = roofline(10**8, gemm, "bf16", H200_LIKE)
    assert half.policy_ms == half.bound_ms
    mem = roofline(8 * 10**9, 10**9, "fp32", H200_LIKE)
    assert mem.policy_ms == pytest.approx(mem.bound_ms) and mem.limiter == "memory"


def test_impossible_only_beyond_the_factor():
    bound = 2.0
    assert not is_impossible(bound, bound)
    assert not is_impossible(bound / IMPOSSIBLE_FACTOR, bound)
    assert is_impossible(bound / IMPOSSIBLE_FACTOR * 0.99, bound)
    assert not is_impossible(0.0, 0.0)
    assert IMPOSSIBLE_FACTOR == 1.25


def test_cpu_ceilings_are_not_meaningful():
    ceilings = measure_ceilings("cpu")
    assert ceilings.device == "cpu" and not ceilings.meaningful
    with pytest.raises(ValueError, match="not measured"):
        roofline(10, 10, "fp32", ceilings)


def test_ceilings_are_measured_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rl, "device_key", lambda index: f"Fake GPU {index}|driver 1|torch x")
    measured = []

    def fake_measure(index, key):
        measured.append(key)
        return Ceilings(f"cuda:{index}", 3000.0 + len(measured), {"fp32": 1.0}, key=key)

    monkeypatch.setattr(rl, "_measure", fake_measure)
    first = measure_ceilings("cuda:0")
    again = measure_ceilings("cuda:0")
    assert measured == ["Fake GPU 0|driver 1|torch x"] and again == first
    cache = json.loads((tmp_path / "ceilings.json").read_text())
    assert cache["Fake GPU 0|driver 1|torch x"]["bandwidth_gbps"] == 3001.0
    measure_ceilings("cuda:1")
    assert len(measured) == 2 and len(json.loads((tmp_path / "ceilings.json").read_text())) == 2
    assert measure_ceilings("cuda:0", refresh=True).bandwidth_gbps == 3003.0


# -- on a GPU --------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_measured_ceilings_are_plausible_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    fp32_precision = torch.get_float32_matmul_precision()
    ceilings = measure_ceilings("cuda")
    assert torch.get_float32_matmul_precision() == fp32_precision  # TF32 setting restored
    assert 500 < ceilings.bandwidth_gbps < 20_000
    peaks = ceilings.peak_tflops
    assert peaks["bf16"] > peaks["fp32"] > 0 and peaks["fp16"] > peaks["fp32"]
    assert peaks["fp32"] > peaks["fp32-ieee"] > 0  # TF32 tensor cores past exact SGEMM
    assert torch.cuda.get_device_name() in ceilings.key
    started = time.perf_counter()
    assert measure_ceilings("cuda") == ceilings
    assert time.perf_counter() - started < 0.5


@pytest.mark.gpu
def test_torch_kernels_are_not_impossible(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    ceilings = measure_ceilings("cuda")

    def median_ms(fn, reps=20):
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[reps // 2]

    x = torch.randn(1 << 28, device="cuda")  # 1 GiB
    model = nn.Identity()
    out = x * 2.0
    nbytes, flops = count_work(model, [x], out)
    bound = roofline(nbytes, flops, "fp32", ceilings)
    t = median_ms(lambda: x * 2.0)
    assert not is_impossible(t, bound.bound_ms)
    assert 0.6 < fraction(bound.bound_ms, t) < IMPOSSIBLE_FACTOR

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    lin = nn.Linear(8192, 8192, bias=False, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        out = lin(a)
        nbytes, flops = count_work(lin, [a], out)
        bound = roofline(nbytes, flops, "bf16", ceilings)
        t = median_ms(lambda: lin(a))
    assert bound.limiter == "compute"
    assert not is_impossible(t, bound.bound_ms)
    assert 0.6 < fraction(bound.bound_ms, t) < IMPOSSIBLE_FACTOR


def test_a_table_read_only_through_gathers_counts_the_rows_touched():
    """A few rows looked up from a big table: the floor is those rows, not the table, or an
    honest lookup kernel would be called impossible. Used whole anywhere, the table counts."""

    class Lookup(torch.nn.Module):
        def __init__(self, whole: bool = False):
            super().__init__()
            self.table = torch.nn.Embedding(100_000, 256)
            self.whole = whole

        def forward(self, ids):
            rows = self.table(ids).sum(1)
            return rows + self.table.weight.mean() if self.whole else rows

    ids = torch.randint(0, 100_000, (8, 4))
    small = Lookup()
    out = small(ids)
    nbytes, _ = count_work(small, [ids], out)
    assert nbytes == 32 * 256 * 4 + ids.numel() * 8 + out.numel() * 4
    whole = Lookup(whole=True)
    nbytes, _ = count_work(whole, [ids], whole(ids))
    assert nbytes == 100_000 * 256 * 4 + ids.numel() * 8 + out.numel() * 4
    # More lookups than rows: never more than the table itself.
    many = torch.randint(0, 100_000, (1000, 200))
    big_out = small(many)
    nbytes, _ = count_work(small, [many], big_out)
    assert nbytes == 100_000 * 256 * 4 + many.numel() * 8 + big_out.numel() * 4
    # index_select and gather on an input.
    x = torch.randn(64, 10_000)
    idx = torch.randint(0, 10_000, (5,))

    class Select(torch.nn.Module):
        def forward(self, x, idx):
            return x.index_select(1, idx)

    sel = Select()
    nbytes, _ = count_work(sel, [x, idx], sel(x, idx))
    assert nbytes == 64 * 5 * 4 + 5 * 8 + 64 * 5 * 4


def test_the_report_says_which_ceiling_the_fraction_is_of():
    from kernelwright.sandbox.judge.summary import _roofline_line

    strict = dataclasses.replace(roofline(10**8, 2 * 8192**3, "fp32", H200_LIKE), fraction=0.5)
    line = _roofline_line(strict)
    assert line.startswith("50% of roofline (candidate): bound 8.2463 ms, compute-bound")
    assert "at 133 TFLOP/s, fp32 strict: TF32's rate / 3 (tf32x3)" in line
    assert line.endswith("no time may beat 2.7488 ms (at 400 TFLOP/s)")
    half = _roofline_line(roofline(10**8, 2 * 8192**3, "bf16", H200_LIKE))
    assert "no time may beat" not in half and "at 800 TFLOP/s)" in half
