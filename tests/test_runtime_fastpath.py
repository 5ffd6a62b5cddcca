"""The runtime guard's unsampled path (issue 28): the envelope's fast check gives the full
check's verdict on every input, hooks still run, options changed after construction reach it,
capture_safe=True, and a soak of 8 threads whose counters add up."""

from __future__ import annotations

import importlib
import itertools
import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernelwright.runtime import Envelope, TensorSpec, ValueSpec, guard

# The module (kernelwright.runtime.guard is the function of that name in the package).
guard_module = importlib.import_module("kernelwright.runtime.guard")


class Silu(nn.Module):
    def forward(self, x):
        return F.silu(x)


class Off(nn.Module):
    def forward(self, x):
        return F.silu(x) + 1.0


def _other_layouts(base: torch.Tensor) -> list:
    """Layouts whose tensors answer is_contiguous() True (mkldnn; a jagged nested tensor, whose
    shape holds a nested int) or raise on it (sparse CSR): only the layout check keeps them out."""
    made = [base.to_sparse_csr()]
    if torch.backends.mkldnn.is_available():
        made.append(base.to_mkldnn())
    made.append(
        torch.nested.nested_tensor([torch.randn(2, 8), torch.randn(3, 8)], layout=torch.jagged)
    )
    return made


def _inputs() -> list:
    """Tensors and values that sit just inside and just outside the specs below."""
    base = torch.randn(4, 8)
    return [
        base,
        torch.randn(9, 8),
        torch.randn(4, 7),
        torch.randn(4, 8, 1),
        torch.randn(8),
        base.double(),
        base.half(),
        base.to(torch.int64),
        torch.randn(8, 4).t(),  # (4, 8), not contiguous
        torch.randn(4, 16)[:, ::2],  # (4, 8), strided
        torch.empty(4, 8, device="meta"),
        base.to_sparse(),  # (4, 8), sparse COO: strides (0, 0)
        torch.nn.Parameter(base.clone()),  # a Tensor subclass
        *_other_layouts(base),
        torch.randn(()),
        3,
        4,
        3.0,
        True,
        "3",
        None,
        (4, 8),
    ]


SPECS = [
    TensorSpec("float32", (4, 8)),
    TensorSpec("float32", (None, 8), "cpu"),
    TensorSpec("float32", (None, None), "cuda"),
    TensorSpec("float32", (4, 8), "meta"),
    TensorSpec("float32", (4, None), contiguous=False),
    TensorSpec("float32", (None, None, 8)),
    TensorSpec("float32", (None, None), contiguous=False),
    TensorSpec("float64", (4, 8), "cpu"),
    TensorSpec("float32", ()),
    ValueSpec("int", 3),
    ValueSpec("int", None, exact=False),
    ValueSpec("float", 3.0),
    ValueSpec("bool", True),
    ValueSpec("NoneType", None),
]


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support")
def test_the_fast_envelope_check_gives_the_full_checks_verdict_on_every_input():
    inside = 0
    for spec in SPECS:
        env = Envelope([spec])
        for x in _inputs():
            want = env.mismatch((x,), {}) is None
            assert env.admits((x,)) is want, (spec, x)
            inside += want
    assert inside >= len(SPECS)  # some of each spec's inputs are inside
    pair = Envelope([SPECS[1], SPECS[7]])
    for a, b in itertools.product(_inputs(), _inputs()):
        assert pair.admits((a, b)) is (pair.mismatch((a, b), {}) is None), (a, b)
    assert not pair.admits((torch.randn(4, 8),))  # too few inputs
    assert not pair.admits((torch.randn(4, 8), 3, 3))  # too many


def test_an_input_outside_still_falls_back_on_the_fast_path():
    env = Envelope([TensorSpec("float32", (None, 8), "cpu")])
    g = guard(Silu(), Off(), shadow_rate=0.0, envelope=env)
    inside = torch.randn(5, 8)
    assert torch.equal(g(inside), F.silu(inside) + 1.0)  # the (wrong) kernel: inside
    for x in (inside.double(), torch.randn(5, 9), torch.randn(8, 5).t(), torch.randn(5, 8, 1)):
        assert torch.equal(g(x), F.silu(x))
    inside.resize_(5, 9)  # the same tensor, its metadata changed in place
    inside.copy_(torch.randn(5, 9))  # the grown part is uninitialised memory (NaN != NaN)
    assert torch.equal(g(inside), F.silu(inside))
    s = g.stats()
    assert (s["calls"], s["out_of_envelope"], s["fallbacks"]) == (6, 5, 5)


def test_hooks_on_the_kernel_the_guard_and_every_module_still_run():
    kernel = Silu()
    g = guard(Silu(), kernel, shadow_rate=0.0)
    seen: list[str] = []
    handles = [
        kernel.register_forward_hook(lambda m, a, out: seen.append("kernel")),
        g.register_forward_pre_hook(lambda m, a: seen.append("guard")),
    ]
    x = torch.randn(3)
    g(x)
    assert seen == ["guard", "kernel"]
    for h in handles:
        h.remove()
    seen.clear()
    g(x)
    assert seen == []
    h = nn.modules.module.register_module_forward_hook(
        lambda m, a, out: seen.append(type(m).__name__)
    )
    try:
        g(x)
    finally:
        h.remove()
    assert seen == ["Silu", "Guard"]  # the kernel inside the guard, then the guard
    assert g.stats()["calls"] == 3


def test_options_changed_after_construction_reach_the_unsampled_path():
    g = guard(Silu(), Off(), shadow_rate=0.0, on_mismatch="call")
    x = torch.randn(4)
    assert torch.equal(g(x), F.silu(x) + 1.0)
    g.optimized = Silu()
    assert torch.equal(g(x), F.silu(x))  # the new kernel
    g.optimized = Off()
    g.shadow_rate = 1.0
    assert torch.equal(g(x), F.silu(x))  # sampled at once: the mismatch falls back
    assert g.stats()["mismatches"] == 1
    g.envelope = Envelope([TensorSpec("float32", (5,))])
    g.shadow_rate = 0.0
    assert torch.equal(g(x), F.silu(x))  # outside the new envelope
    g.check_finite = "always"
    assert g._fast is None  # every output is checked: the routed path
    assert not any(k.startswith("_fast") for k in g.state_dict())
    with pytest.raises(ValueError, match="shadow_rate"):
        g.shadow_rate = 2.0


def test_capture_safe_records_no_time_and_samples_nothing_while_capturing(monkeypatch):
    with pytest.raises(ValueError, match="capture_safe"):
        guard(Silu(), Silu(), capture_safe=True, check_finite="always")

    class Counting(Silu):
        calls = 0

        def forward(self, x):
            Counting.calls += 1
            return super().forward(x)

    g = guard(Counting(), Silu(), shadow_rate=1.0, capture_safe=True)
    x = torch.randn(4)
    monkeypatch.setattr(guard_module, "_capturing", lambda: True)
    for _ in range(5):
        assert torch.equal(g(x), F.silu(x))
    assert Counting.calls == 0  # no shadow check while a graph is captured
    monkeypatch.setattr(guard_module, "_capturing", lambda: False)
    g(x)
    s = g.stats()
    assert Counting.calls == 1 and s["shadow_checks"] == 1 and s["calls"] == 6
    assert s["latency"]["host"]["count"] == 0  # capture_safe: the unsampled calls are not timed
    plain = guard(Silu(), Silu(), shadow_rate=0.0, capture_safe=True)
    for _ in range(3):
        plain(x)
    assert plain.stats()["calls"] == 3


def test_the_compiled_check_holds_names_only_and_counts_its_inputs():
    env = Envelope([TensorSpec("float32", (None, 8), "cpu"), ValueSpec("str", "x')\nboom")])
    assert "boom" not in env.checker.__doc__  # values are the namespace's constants
    assert env.admits((torch.randn(2, 8), "x')\nboom"))
    assert not env.admits((torch.randn(2, 8), "y"))
    assert Envelope([]).admits(()) and not Envelope([]).admits((1,))


def test_a_dropped_guard_is_freed_without_the_garbage_collector():
    import gc
    import weakref

    g = guard(Silu(), Silu(), shadow_rate=0.0, envelope=Envelope([TensorSpec("float32", (4,))]))
    g(torch.randn(4))
    ref = weakref.ref(g)
    gc.disable()
    try:
        del g
        assert ref() is None  # the unsampled path's closure holds no reference to its guard
    finally:
        gc.enable()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.trace
def test_a_traced_guard_records_the_kernel_and_capture_safe_set_later_reaches_the_fast_path():
    g = guard(Silu(), Off(), shadow_rate=0.0, host_time_every=1)
    x = torch.randn(4)
    traced = torch.jit.trace(g, (x,), check_trace=False)
    assert torch.equal(traced(x), F.silu(x) + 1.0)
    assert g.stats()["calls"] == 1  # the traced call went through the guard once
    g.capture_safe = True
    g(x)
    assert g.stats()["latency"]["host"]["count"] == 1  # the traced call only: not timed now


def test_one_unsampled_call_in_host_time_every_is_timed():
    x = torch.randn(4)
    g = guard(Silu(), Silu(), shadow_rate=0.0)  # the default: one in 16
    for _ in range(160):
        g(x)
    s = g.stats()
    # The counter's first tick went to drawing the first sampled call: calls had ticks 1..160.
    assert s["calls"] == 160 and s["latency"]["host"]["count"] == 10
    hooked = guard(Silu(), Silu(), shadow_rate=0.0, host_time_every=4)
    hooked.optimized.register_forward_hook(lambda m, a, out: None)  # the routed-free slow hop
    for _ in range(40):
        hooked(x)
    assert hooked.stats()["latency"]["host"]["count"] == 10
    for bad in (0, 3, 2048):
        with pytest.raises(ValueError, match="host_time_every"):
            guard(Silu(), Silu(), host_time_every=bad)
        with pytest.raises(ValueError, match="host_time_every"):
            g.host_time_every = bad
    g.host_time_every = 1  # rebuilds the unsampled path: every call timed from now on
    for _ in range(5):
        g(x)
    assert g.stats()["latency"]["host"]["count"] == 15


@pytest.mark.slow
def test_a_soak_of_8_threads_with_a_mismatch_every_1000_calls():
    """8 threads x 10,000 calls, 5% shadow-checked, every 1000th kernel call wrong, every 500th
    call outside the envelope: every sampled mismatch is counted, every fallback returns the
    reference's output, the counters add up, nothing raises."""
    threads_n, per_thread = 8, 10_000
    bad_ids: set[int] = set()
    ref_seen: set[int] = set()
    lock = threading.Lock()

    class Kernel(nn.Module):
        """Doubles its input; every 1000th call (across threads) negates and shifts element 0."""

        def __init__(self):
            super().__init__()
            self.count = itertools.count(1)

        def forward(self, x):
            out = x * 2
            if next(self.count) % 1000 == 0:
                with lock:
                    bad_ids.add(int(x[0]))
                out[0] = -out[0] - 1.0
            return out

    class Reference(nn.Module):
        """Doubles its input, and tags its output's last element (1e-6: within tolerance)."""

        def forward(self, x):
            with lock:
                ref_seen.add(int(x[0]))
            out = x * 2
            out[1] = 1e-6
            return out

    env = Envelope([TensorSpec("float32", (2,), "cpu")])
    g = guard(
        Reference(),
        Kernel(),
        shadow_rate=0.05,
        on_mismatch="call",
        envelope=env,
        seed=7,
        host_time_every=1,  # every unsampled call timed: the host log counts them all
    )
    results: dict[int, torch.Tensor] = {}
    outside_ids: set[int] = set()
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            mine = {}
            for i in range(per_thread):
                call_id = t * per_thread + i
                if i % 500 == 499:
                    outside_ids.add(call_id)
                    x = torch.tensor([float(call_id), 0.0], dtype=torch.float64)
                else:
                    x = torch.tensor([float(call_id), 0.0])
                mine[call_id] = g(x)
            results.update(mine)
        except BaseException as e:  # the test reports any
            errors.append(e)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    total = threads_n * per_thread
    assert len(results) == total
    s = g.stats()
    shadowed = ref_seen - outside_ids
    caught = bad_ids & shadowed
    assert len(bad_ids) == (total - len(outside_ids)) // 1000  # the kernel ran on every inside call
    assert s["calls"] == total
    assert s["out_of_envelope"] == len(outside_ids) == threads_n * (per_thread // 500)
    assert outside_ids <= ref_seen  # every outside call ran the reference
    assert s["shadow_checks"] == len(shadowed)
    assert 0.04 * total < s["shadow_checks"] < 0.06 * total
    assert s["mismatches"] == len(caught)
    assert s["fallbacks"] == s["mismatches"] + s["out_of_envelope"]
    assert s["errors"] == s["nonfinite"] == s["reference_errors"] == 0
    assert s["latency"]["host"]["count"] == total - s["shadow_checks"] - s["out_of_envelope"]
    assert s["latency"]["device"]["count"] == s["shadow_checks"]
    fallbacks = caught | outside_ids
    for call_id, out in results.items():
        from_reference = float(out[1]) == pytest.approx(1e-6)
        assert from_reference is (call_id in fallbacks), call_id
        wrong = call_id in bad_ids and call_id not in caught  # unsampled: nothing can know
        assert float(out[0]) == (-2 * call_id - 1 if wrong else 2 * call_id)


def test_the_latency_logs_bulk_extend_is_add_of_each_sample():
    from kernelwright.runtime.latency import BUCKETS, LatencyLog

    gen = torch.Generator().manual_seed(0)
    samples = (torch.rand(3000, generator=gen, dtype=torch.float64) * 2e-3).tolist()
    samples += [*BUCKETS, 0.0, 1e-9, 20.0, BUCKETS[3], BUCKETS[3]]  # on every bound, and beyond
    one, bulk = LatencyLog(), LatencyLog()
    for s in samples:
        one.add(s)
    bulk.extend(samples[:1000])
    bulk.extend(samples[1000:])
    assert bulk.buckets == one.buckets and bulk.count == one.count == len(samples)
    assert list(bulk.window) == list(one.window) and bulk.sum == pytest.approx(one.sum)
