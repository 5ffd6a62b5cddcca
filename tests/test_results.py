"""EvalResult and Baseline: frozen, JSON round-trippable, bounded messages, honest summaries."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing

import pytest

from kernelwright.sandbox import results
from kernelwright.sandbox.results import (
    MAX_MESSAGE_CHARS,
    Baseline,
    Correctness,
    Environment,
    EvalResult,
    KernelStats,
    Mismatch,
    OpTime,
    Roofline,
    Timing,
    Timings,
)

FULL = EvalResult(
    status="incorrect",
    rule="mismatch",
    message="out: 3 of 10 elements differ",
    task="gelu",
    shape_overrides={"dim": 64},
    correctness=Correctness(
        trials=3,
        seeds=(1, 2, 3),
        shapes=({"dim": 64}, {"dim": 55}),
        err_vs_fp64=float("inf"),
        mismatch=Mismatch("out[1]", 3, 10, 0.5, float("nan"), (((1, 2), 0.25, -1.0),)),
    ),
    timings=Timings(meaningful=True, candidate=Timing(1.5, 1.4, 1.6, 1.3, 2.0, 50)),
    roofline=Roofline(10, 20, 4200.0, 400.0, 0.001, "memory", fraction=0.5),
    kernels=(KernelStats("_k", num_warps=4, registers=32, launches=2),),
    environment=Environment(
        device="cuda", gpu="H200", torch="2.11", triton="3.6", isolation=("netns", "audit-hook")
    ),
)


def test_round_trip_keeps_every_field_including_nan_and_inf():
    again = EvalResult.from_json(FULL.to_json())
    assert again.to_json() == FULL.to_json()
    assert again.correctness.mismatch.first_bad == (((1, 2), 0.25, -1.0),)
    assert math.isnan(again.correctness.mismatch.max_rel_err)
    assert again.correctness.err_vs_fp64 == float("inf")
    assert again.environment.isolation == ("netns", "audit-hook")
    json.loads(FULL.to_json())  # strict JSON: no bare NaN/Infinity tokens


def test_results_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        FULL.status = "ok"  # type: ignore[misc]


def test_unknown_status_is_refused():
    with pytest.raises(ValueError, match="unknown status"):
        EvalResult(status="passed")  # type: ignore[arg-type]


def test_message_is_bounded_keeping_head_and_tail():
    text = "first error line\n" + "x" * 20000 + "\nLastError: the real cause"
    r = EvalResult(status="runtime_error", message=text)
    assert len(r.message) <= MAX_MESSAGE_CHARS
    assert r.message.startswith("first error line") and r.message.endswith("the real cause")
    assert "characters cut" in r.message


def test_summary_says_why_or_how_fast():
    assert FULL.summary().startswith("incorrect [mismatch]: out: 3 of 10")
    ok = EvalResult(
        status="ok",
        speedup_eager=2.0,
        speedup_compiled=1.25,
        roofline=dataclasses.replace(FULL.roofline, fraction=0.8),
    )
    assert ok.summary() == "ok, 2.00x vs eager, 1.25x vs torch.compile, 80% of roofline"
    cpu = EvalResult(status="ok", timings=Timings(meaningful=False))
    assert "no meaningful timing" in cpu.summary()


def test_environment_key_separates_gpus_and_versions():
    a = Environment(device="cuda", gpu="H200", torch="2.11", triton="3.6")
    assert a.key != dataclasses.replace(a, triton="3.7").key
    assert a.key != dataclasses.replace(a, gpu="H100").key


def test_baseline_round_trip_with_ops():
    b = Baseline(status="ok", ops=(OpTime("aten::addmm", 1, 0.7, 0.7),), ops_note="profiler")
    assert Baseline.from_dict(json.loads(json.dumps(b.to_dict()))) == b


# -- every string capped -----------------------------------------------------------------------

HUGE = "k" * 150_000 + "MIDDLE" + "z" * 150_000  # 300 KB


def _sample(tp, depth=0):
    """A value of annotation `tp` whose every string is HUGE and every collection has an entry
    (nested records built the same way)."""
    if isinstance(tp, str):
        tp = eval(tp, vars(typing) | vars(results))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, types.UnionType):
        return _sample(next(a for a in args if a is not type(None)), depth)
    if origin is tuple:
        return (
            (_sample(args[0], depth),) if args[-1] is Ellipsis else tuple(_sample(a) for a in args)
        )
    if origin is dict:
        return {HUGE: _sample(args[1], depth)}
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {f.name: _sample(hints[f.name], depth + 1) for f in dataclasses.fields(tp)}
        if "status" in kwargs and tp is EvalResult:
            kwargs["status"] = "incorrect"
        return tp(**kwargs)
    return {str: HUGE, int: 3, float: 1.5, bool: True}[tp]


def _strings(value):
    """Every string in a record: its fields, nested records, tuples, dict keys and values."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            if f.name != "status":  # a Literal, validated
                yield from _strings(getattr(value, f.name))
    elif isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


@pytest.mark.parametrize("cls", [EvalResult, Baseline], ids=lambda c: c.__name__)
def test_every_string_of_a_result_is_capped_with_a_marker(cls):
    """Every str anywhere in the record (fields, nested records, tuples, dict keys) is filled
    with 300 KB; what comes back is small, and each cut string says so and keeps both ends."""
    record = _sample(cls)
    text = record.to_json()
    assert len(text) < 64_000, len(text)
    found = list(_strings(record))
    assert len(found) > 10
    for s in found:
        if s in ("memory", "compute"):  # Roofline.limiter, a Literal
            continue
        assert len(s) <= MAX_MESSAGE_CHARS and "characters cut" in s, s[:80]
        assert s.startswith("kkk") and s.endswith("zzz")
    # The same caps apply to what from_dict rebuilds from an uncapped dict.
    raw = json.loads(text.replace('"kkk', '"' + "k" * 200_000 + "kkk"))
    again = cls.from_dict(raw)
    assert len(again.to_json()) < 64_000
    assert again.to_json() == cls.from_json(again.to_json()).to_json()  # capping is idempotent


def test_a_300_kb_kernel_name_gives_a_small_result():
    result = EvalResult(status="ok", kernels=(KernelStats(name="_kernel_" + HUGE, launches=1),))
    name = result.kernels[0].name
    assert len(name) <= results.MAX_NAME_CHARS and "\n" not in name
    assert name.startswith("_kernel_kkk") and name.endswith("zzz") and "characters cut" in name
    assert len(result.to_json()) < 2_000
    from_dict = EvalResult.from_dict(
        {"status": "ok", "kernels": [{"name": "_kernel_" + HUGE, "launches": 1}]}
    )
    assert from_dict.kernels[0].name == name


def test_long_collections_keep_their_first_entries_and_say_so():
    result = EvalResult(
        status="ok",
        notes=tuple(f"note {i}" for i in range(1000)),
        kernels=tuple(KernelStats(f"k{i}") for i in range(1000)),
    )
    assert result.notes[: results.MAX_ITEMS] == tuple(f"note {i}" for i in range(256))
    assert result.notes[-1] == "[... 744 more cut ...]"
    assert len(result.kernels) == results.MAX_ITEMS and result.kernels[0].name == "k0"


def test_short_strings_and_collections_are_kept_as_they_are():
    notes, kernels = ("a note",), (KernelStats("_k"),)
    result = EvalResult(status="ok", notes=notes, kernels=kernels, phases_s={"trials": 1.0})
    assert result.notes is notes and result.kernels is kernels
    assert EvalResult.from_json(result.to_json()) == result


def test_the_summary_says_not_meaningful_once_and_no_blank_versions():
    from kernelwright.sandbox.judge.summary import format_result
    from kernelwright.sandbox.judge.timed import _interpreter_timings

    r = results.EvalResult(status="ok", timings=_interpreter_timings())
    text = format_result(r)
    assert text.count("not meaningful") == 1, text
    assert "environment:" not in text  # no judge ran: no versions to say
    env = results.Environment(torch="2.13.0", triton="3.7.1", interpreter=True)
    text = format_result(dataclasses.replace(r, environment=env))
    assert "torch 2.13.0, triton 3.7.1" in text
