"""sandbox/judge/timing.py: interleaving and bookkeeping on CPU (a fake clock), real timing on a
GPU."""

from __future__ import annotations

import pytest
import torch

from kernelwright.sandbox.judge import timing
from kernelwright.sandbox.judge.timing import summarize, time_interleaved
from kernelwright.sandbox.results import Timing


def test_summarize():
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert t == Timing(median_ms=3.0, p25_ms=2.0, p75_ms=4.0, min_ms=1.0, max_ms=5.0, reps=5)
    assert summarize([2.0]).p25_ms == 2.0
    with pytest.raises(ValueError):
        summarize([])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_refuses_to_time_without_cuda():
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        time_interleaved({"f": (lambda i: (), lambda: None)}, reps=1, warmup=0)


class FakeClock:
    """Stands in for the captured CUDA names: each call advances a clock by a known amount."""

    def __init__(self):
        self.now = 0.0
        self.log: list[str] = []

    def install(self, monkeypatch):
        clock = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

        def record(event, stream=None):
            event.at = clock.now

        monkeypatch.setattr(timing, "_cuda_available", lambda: True)
        monkeypatch.setattr(timing, "_Event", Event)
        monkeypatch.setattr(timing, "_record", record)
        monkeypatch.setattr(timing, "_elapsed_time", lambda a, b: b.at - a.at)
        monkeypatch.setattr(timing, "_event_synchronize", lambda e: None)
        monkeypatch.setattr(timing, "_device_synchronize", lambda: clock.log.append("sync"))
        monkeypatch.setattr(timing, "_current_stream", lambda: None)
        monkeypatch.setattr(timing, "flush_buffer", lambda: torch.zeros(4))

    def function(self, name: str, ms: float):
        def call(*args):
            self.log.append(f"{name}{args}")
            self.now += ms
            return (name, args)

        return call


def test_interleaving_order_indices_and_after_call(monkeypatch):
    clock = FakeClock()
    clock.install(monkeypatch)
    prepared, after = [], []

    def prepare(name):
        def make(i):
            prepared.append((name, i))
            clock.now += 100.0  # preparing is outside the timed region
            return (i,)

        return make

    fns = {n: (prepare(n), clock.function(n, ms)) for n, ms in (("a", 1.0), ("b", 2.0), ("c", 3.0))}
    result = time_interleaved(
        fns, reps=4, warmup=2, after_call=lambda *a: after.append(a), l2_flush=True
    )
    assert {n: t.median_ms for n, t in result.items()} == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert all(t.reps == 4 for t in result.values())
    calls = [entry[0] for entry in clock.log if entry != "sync"]
    # each round rotates the order by one, so no function always runs first
    assert "".join(calls) == "abc" + "bca" + "cab" + "abc" + "bca" + "cab"
    assert clock.log.count("sync") == 18  # one device-wide synchronize inside every timed call
    assert [i for n, i in prepared if n == "b"] == list(range(6))  # warm-up calls counted too
    assert after[0] == ("a", 0, ("a", (0,)), (0,))
    assert len(after) == 18


# -- on a GPU --------------------------------------------------------------------------------------


def _events_only_ms(fn, reps=10):
    """What a timer without the device synchronize would report."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[reps // 2]


@pytest.mark.gpu
def test_side_stream_work_is_included():
    x = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def on_side(x):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x @ x
            for _ in range(3):
                y = y @ x
        return y  # the caller's stream never waits for it

    def on_main(x):
        y = x @ x
        for _ in range(3):
            y = y @ x
        return y

    t = time_interleaved(
        {"side": (lambda i: (x,), on_side), "main": (lambda i: (x,), on_main)}, reps=10, warmup=2
    )
    assert t["side"].median_ms > 0.8 * t["main"].median_ms
    assert _events_only_ms(lambda: on_side(x)) < 0.2 * t["main"].median_ms  # what it would hide


@pytest.mark.gpu
def test_l2_flush_makes_a_cache_resident_input_read_from_memory():
    small = torch.randn(8 << 20, device="cuda")  # 32 MiB: fits the 60 MB L2 of an H200
    tiny = torch.randn(1024, device="cuda")

    def busy(args):
        def prepare(i):
            # Keep the GPU busy while the host records the start event and launches the call,
            # with or without a flush, so both runs carry the same (hidden) launch latency.
            torch.cuda._sleep(60_000)
            return args

        return prepare

    fns = {"small": (busy((small,)), torch.sum), "tiny": (busy((tiny,)), torch.sum)}
    hot = time_interleaved(fns, reps=50, warmup=5, l2_flush=False)
    cold = time_interleaved(fns, reps=50, warmup=5, l2_flush=True)
    read_hot = hot["small"].median_ms - hot["tiny"].median_ms
    read_cold = cold["small"].median_ms - cold["tiny"].median_ms
    # Measured on an H200: 8.7 us from L2, 15.2 us after a flush (1.74x).
    assert read_cold > 1.4 * read_hot
    assert read_cold > small.numel() * 4 / 4.8e12 * 1e3  # no faster than HBM's datasheet rate


@pytest.mark.gpu
def test_the_same_kernel_twice_gives_the_same_median():
    x = torch.randn(1 << 27, device="cuda")  # 512 MiB

    def double(x):
        return x * 2.0

    t = time_interleaved(
        {"a": (lambda i: (x,), double), "b": (lambda i: (x,), double)}, reps=30, warmup=5
    )
    assert abs(t["a"].median_ms / t["b"].median_ms - 1) < 0.03
    assert t["a"].spread < 0.05


@pytest.mark.gpu
def test_cuda_graphs_replay_with_fresh_inputs():
    inputs = [torch.full((1 << 20,), float(i), device="cuda") for i in range(3)]
    seen = []

    def after(name, i, out, args):
        seen.append((i, out[0].item(), args[0][0].item()))

    t = time_interleaved(
        {"g": (lambda i: (inputs[i % 3].clone(),), lambda x: x * 2.0)},
        reps=6,
        warmup=1,
        after_call=after,
        cuda_graphs=True,
    )
    assert t["g"].reps == 6 and t["g"].median_ms > 0
    assert seen == [(i, 2.0 * (i % 3), float(i % 3)) for i in range(7)]


@pytest.mark.gpu
def test_patching_torch_cuda_later_does_not_reach_the_timer(monkeypatch):
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0)
    monkeypatch.setattr(torch.cuda.Event, "record", lambda self, stream=None: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    x = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def on_side(x):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            return x @ x @ x

    t = time_interleaved({"f": (lambda i: (x,), on_side)}, reps=5, warmup=1)
    assert t["f"].median_ms > 0.5  # two 4096^3 fp32 GEMMs: milliseconds, not 0


@pytest.mark.gpu
def test_head_start_hides_host_launch_overhead_alike():
    """A call that spends 300 us on the host before launching a tiny kernel: without a head start
    the idle GPU is timed; with a head start longer than that, only the kernel is."""
    import time as _time

    x = torch.randn(1024, device="cuda")

    def slow_launch(t):
        until = _time.perf_counter() + 300e-6
        while _time.perf_counter() < until:
            pass
        return t * 2

    fns = {"slow": (lambda i: (x.clone(),), slow_launch)}
    bare = time_interleaved(fns, reps=30, warmup=3)["slow"].median_ms
    ahead = time_interleaved(fns, reps=30, warmup=3, head_start_us=2000)["slow"].median_ms
    assert bare > 0.25, bare
    assert ahead < 0.1, ahead
    assert timing.head_start_cycles(0) == 0
    assert timing.head_start_cycles(100) < timing.head_start_cycles(1000)
