"""The runtime guard (kernelwright.runtime): shadow checks, falling back on a wrong, raising or
NaN-producing kernel and on inputs outside the verified envelope, its counters and JSON logs,
thread safety, and its imports (no agent stack)."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernelwright.runtime import Envelope, GuardMismatch, TensorSpec, ValueSpec, guard

EXAMPLES = Path(__file__).parent.parent / "prompts" / "examples"


class Silu(nn.Module):
    def forward(self, x):
        return F.silu(x)


class SiluByHand(nn.Module):
    """The same function by another formula: within fp32's 1e-4, not bitwise equal."""

    def forward(self, x):
        return x / (1.0 + torch.exp(-x))


class Off(nn.Module):
    """A wrong kernel: right but for `delta` added to every element."""

    def __init__(self, delta: float = 1e-2):
        super().__init__()
        self.delta = delta

    def forward(self, x):
        return F.silu(x) + self.delta


class Raises(nn.Module):
    def forward(self, x):
        raise RuntimeError("illegal memory access (pretend)")


class NaNAt(nn.Module):
    def forward(self, x):
        out = F.silu(x).clone()
        out[0, 0] = float("nan")
        return out


def _records(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "kernelwright.runtime"]


def test_a_right_kernel_passes_through_with_about_shadow_rate_checks():
    g = guard(Silu(), SiluByHand(), shadow_rate=0.05, host_time_every=1)  # every call timed
    x = torch.randn(8, 64)
    calls = 2000
    for _ in range(calls):
        out = g(x)
    assert torch.equal(out, SiluByHand()(x))  # the kernel's own output, not the reference's
    s = g.stats()
    assert s["calls"] == calls
    # Binomial(2000, 0.05): mean 100, sd 9.7; the seeded draw is deterministic anyway.
    assert 70 <= s["shadow_checks"] <= 130
    assert (s["mismatches"], s["fallbacks"], s["errors"], s["falling_back"]) == (0, 0, 0, None)
    assert s["latency"]["host"]["count"] == calls - s["shadow_checks"]
    assert s["latency"]["device"]["count"] == s["shadow_checks"]
    assert 0 < s["latency"]["host"]["p50_s"] <= s["latency"]["host"]["p99_s"]


def test_a_wrong_kernel_falls_back_and_counts_it(caplog):
    caplog.set_level(logging.INFO, logger="kernelwright.runtime")
    g = guard(Silu(), Off(), shadow_rate=0.1, name="silu", version="7")
    x = torch.randn(4, 32)
    outs = [g(x) for _ in range(100)]
    s = g.stats()
    wrong = [i for i, o in enumerate(outs) if not torch.equal(o, F.silu(x))]
    first_check = len(wrong)  # the calls before the first sampled one ran the wrong kernel
    assert 0 < first_check < 60 and wrong == list(range(first_check))
    assert s["shadow_checks"] == 1 and s["mismatches"] == 1
    assert s["fallbacks"] == 100 - first_check
    assert s["falling_back"].startswith("mismatch: out: 128 of 128 elements off")
    events = _records(caplog)
    mismatch = next(e for e in events if e["event"] == "mismatch")
    assert mismatch["guard"] == "silu" and mismatch["version"] == "7" and mismatch["tripped"]
    assert mismatch["inputs"] == ["float32[4, 32] cpu"] and mismatch["counters"]["mismatches"] == 1
    assert "max abs err 0.01" in mismatch["reason"]
    assert any(e["event"] == "fallback" for e in events)
    g.reset()
    assert g.falling_back is None and not torch.equal(g(x), F.silu(x))  # the kernel again


def test_on_mismatch_call_falls_back_for_that_call_only_and_raise_raises():
    g = guard(Silu(), Off(), shadow_rate=1.0, on_mismatch="call")
    x = torch.randn(3, 5)
    assert torch.equal(g(x), F.silu(x)) and torch.equal(g(x), F.silu(x))
    assert g.falling_back is None and g.stats()["mismatches"] == 2
    strict = guard(Silu(), Off(), shadow_rate=1.0, on_mismatch="raise")
    with pytest.raises(GuardMismatch, match="elements off"):
        strict(x)


def test_an_exception_in_the_kernel_returns_the_reference_and_trips():
    g = guard(Silu(), Raises(), shadow_rate=0.0)
    x = torch.randn(2, 3)
    assert torch.equal(g(x), F.silu(x))
    assert torch.equal(g(x), F.silu(x))
    s = g.stats()
    assert (s["errors"], s["fallbacks"], s["calls"]) == (1, 2, 2)
    assert "illegal memory access" in s["falling_back"]


def test_nan_the_reference_lacks_falls_back_on_sampled_calls_and_always_when_asked():
    x = torch.randn(4, 4)
    sampled = guard(Silu(), NaNAt(), shadow_rate=1.0)
    assert torch.equal(sampled(x), F.silu(x)) and sampled.stats()["nonfinite"] == 1
    unsampled = guard(Silu(), NaNAt(), shadow_rate=0.0)
    assert torch.isnan(unsampled(x)[0, 0])  # check_finite="sampled": never looked at
    always = guard(Silu(), NaNAt(), shadow_rate=0.0, check_finite="always")
    assert torch.equal(always(x), F.silu(x)) and always.stats()["nonfinite"] == 1


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class LogByHand(nn.Module):
    def forward(self, x):
        return torch.log2(x) * 0.6931471805599453


def test_nan_where_the_reference_has_it_too_is_no_fault():
    g = guard(Log(), LogByHand(), shadow_rate=1.0, check_finite="always")
    x = torch.tensor([[-1.0, 2.0, 0.0, 3.0]])
    out = g(x)
    assert torch.isnan(out[0, 0]) and torch.isinf(out[0, 2])
    assert g.stats()["mismatches"] + g.stats()["nonfinite"] == 0


class Pair(nn.Module):
    def __init__(self, wrong: bool = False):
        super().__init__()
        self.wrong = wrong

    def forward(self, x):
        return x.sum(1), (x * 2 + (1.0 if self.wrong else 0.0), x.argmax(1))


def test_nested_outputs_are_compared_leaf_by_leaf_with_exact_integers():
    x = torch.randn(5, 7)
    assert guard(Pair(), Pair(), shadow_rate=1.0)(x)[0].shape == (5,)
    g = guard(Pair(), Pair(wrong=True), shadow_rate=1.0)
    g(x)
    assert g.falling_back.startswith("mismatch: out[1][0]:")


def test_rtol_atol_override_the_dtype_tolerance():
    x = torch.randn(4, 8)
    loose = guard(Silu(), Off(1e-3), shadow_rate=1.0, atol=1e-2)
    assert torch.equal(loose(x), Off(1e-3)(x)) and loose.stats()["mismatches"] == 0
    strict = guard(Silu(), Off(1e-3), shadow_rate=1.0)
    strict(x)
    assert strict.stats()["mismatches"] == 1  # fp32's atol is 1e-4


def test_structure_differences_are_mismatches():
    class Shape(nn.Module):
        def forward(self, x):
            return F.silu(x).reshape(-1)

    g = guard(Silu(), Shape(), shadow_rate=1.0)
    g(torch.randn(2, 3))
    assert g.falling_back == "mismatch: shape: out has shape (6,), expected (2, 3)"


def test_inputs_outside_the_envelope_fall_back_without_tripping(caplog):
    caplog.set_level(logging.DEBUG, logger="kernelwright.runtime")
    env = Envelope([TensorSpec("float32", (None, 64), "cpu"), ValueSpec("float", 0.5)])

    class Scaled(nn.Module):
        def __init__(self, wrong: bool):
            super().__init__()
            self.wrong = wrong

        def forward(self, x, s):
            return x * s + (1.0 if self.wrong else 0.0)

    # A wrong kernel, never sampled: only the envelope decides who runs.
    g = guard(Scaled(False), Scaled(True), shadow_rate=0.0, envelope=env)
    ok = torch.randn(3, 64)
    assert torch.equal(g(ok, 0.5), ok * 0.5 + 1.0)  # inside: the kernel (any batch)
    other_batch = torch.randn(9, 64)
    assert torch.equal(g(other_batch, 0.5), other_batch * 0.5 + 1.0)
    outside = {
        "shape": (torch.randn(3, 63), 0.5),
        "rank": (torch.randn(3, 64, 1), 0.5),
        "dtype": (torch.randn(3, 64, dtype=torch.float64), 0.5),
        "layout": (torch.randn(64, 3).t(), 0.5),
        "value": (ok, 0.25),
        "value type": (ok, 1),
    }
    for what, args in outside.items():
        assert torch.equal(g(*args), args[0] * args[1]), what  # the reference's result
    assert torch.equal(g(ok, s=0.5), ok * 0.5)  # keyword arguments: outside too
    s = g.stats()
    assert s["out_of_envelope"] == len(outside) + 1 == s["fallbacks"]
    assert s["falling_back"] is None  # the input's doing, not the kernel's
    events = [e for e in _records(caplog) if e["event"] == "out-of-envelope"]
    assert any("verified as (*, 64)" in e["reason"] for e in events)
    assert any("not contiguous" in e["reason"] for e in events)
    on_cuda = Envelope([TensorSpec("float32", (3, 64), "cuda"), ValueSpec("float", 0.5)])
    cuda = guard(Scaled(False), Scaled(True), envelope=on_cuda)
    assert torch.equal(cuda(ok, 0.5), ok * 0.5)  # a CPU tensor where CUDA was verified


def test_envelope_from_verified_examples_and_back():
    examples = [
        [torch.empty(16, 2500, device="meta"), 3],
        [torch.empty(17, 2500, device="meta"), 3],
    ]
    env = Envelope.from_examples(examples, device="cuda")
    assert env.inputs == (TensorSpec("float32", (None, 2500), "cuda"), ValueSpec("int", 3))
    assert Envelope.from_dict(json.loads(json.dumps(env.to_dict()))) == env
    assert Envelope.from_examples([[1.0], [2.0]]).inputs == (ValueSpec("float", None, False),)
    with pytest.raises(ValueError, match="different dtypes or ranks"):
        Envelope.from_examples([[torch.empty(2)], [torch.empty(2, 2)]])


def test_the_guard_is_thread_safe():
    g = guard(Silu(), SiluByHand(), shadow_rate=0.1, host_time_every=1)
    x = torch.randn(4, 16)
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(250):
                assert torch.allclose(g(x), F.silu(x), atol=1e-5)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = g.stats()
    assert s["calls"] == 2000
    assert s["latency"]["host"]["count"] + s["latency"]["device"]["count"] == 2000
    assert s["shadow_checks"] == s["latency"]["device"]["count"] and s["mismatches"] == 0


def test_the_reference_gets_pristine_inputs_on_sampled_calls():
    class Clobbers(nn.Module):
        def forward(self, x):
            out = F.silu(x)
            x.zero_()  # a kernel that writes its input: the reference must not see zeros
            return out

    g = guard(Silu(), Clobbers(), shadow_rate=1.0)
    g(torch.randn(3, 3))
    assert (g.stats()["shadow_checks"], g.stats()["mismatches"]) == (1, 0)
    shared = guard(Silu(), Clobbers(), shadow_rate=1.0, clone_inputs=False)
    shared(torch.randn(3, 3))
    assert shared.stats()["mismatches"] == 1  # without the clone it sees the zeros


def test_load_weights_fills_reference_and_kernel():
    ref, kernel = nn.Linear(4, 3), nn.Linear(4, 3)
    trained = nn.Linear(4, 3)
    g = guard(ref, kernel, shadow_rate=1.0)
    assert g.load_weights(trained.state_dict()) == []
    x = torch.randn(2, 4)
    assert torch.equal(g(x), trained(x)) and g.stats()["mismatches"] == 0


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_a_triton_kernel_under_the_guard():
    """The example GELU kernel (Triton; the interpreter here) against the task's Model."""
    ns: dict = {}
    exec(compile((EXAMPLES / "gelu.py").read_text(), str(EXAMPLES / "gelu.py"), "exec"), ns)

    class Gelu(nn.Module):
        def forward(self, x):
            return F.gelu(x, approximate="tanh")

    g = guard(Gelu(), ns["ModelNew"](), shadow_rate=1.0)
    x = torch.randn(4, 300) * 3
    out = g(x)
    assert g.stats()["shadow_checks"] == 1 and g.stats()["mismatches"] == 0
    assert torch.allclose(out, Gelu()(x), atol=1e-4, rtol=1e-4)


AGENT_STACK = (
    "langgraph",
    "openai",
    "jinja2",
    "kernelwright.agents",
    "kernelwright.codegen",
    "kernelwright.commands",
    "kernelwright.run",
    "kernelwright.report",
    "kernelwright.store",
    "kernelwright.graph",
)


def test_importing_the_runtime_loads_no_agent_stack():
    script = (
        "import sys, kernelwright.runtime\n"
        f"stack = {AGENT_STACK!r}\n"
        "print([m for m in sys.modules if any(m == s or m.startswith(s + '.') for s in stack)])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
