"""The arena's size (sandbox/judge/evaluation.py `arena_bytes`) where the device is short of
room."""

from __future__ import annotations

from types import SimpleNamespace

from kernelwright.sandbox.judge.evaluation import Evaluation

GiB = 1 << 30


class _Cuda:
    def __init__(self, free: int):
        self.free = free

    def empty_cache(self) -> None:
        pass

    def mem_get_info(self) -> tuple[int, int]:
        return self.free, 141 * GiB


def _evaluation(free: int, ref_peak: int, output: int, limit: int) -> SimpleNamespace:
    shape = SimpleNamespace(ref_peak=ref_peak, footprint=output, output_bytes=output, out_meta=[{}])
    ev = SimpleNamespace(
        torch=SimpleNamespace(cuda=_Cuda(free)),
        ctx=SimpleNamespace(main=shape),
        calls=1,
        config=SimpleNamespace(reuse_calls=8, drift_calls=3),
        call_s=float("inf"),
        limit_bytes=lambda: limit,
    )
    ev.judge_bytes = lambda: Evaluation.judge_bytes(ev)
    ev.call_output_bytes = lambda: Evaluation.call_output_bytes(ev)
    ev.arena = None  # arena_bytes runs before the arena exists
    ev.reuse_calls = lambda: Evaluation.reuse_calls(ev)
    ev.most_held_calls = lambda: Evaluation.most_held_calls(ev)
    return ev


def test_a_short_device_still_gives_room_for_a_call_beside_the_held_output():
    # InstanceNorm at KernelBench's size on the H200: 7.5 GB outputs, a call's peak 15 GB, the
    # judge's own estimate leaving 15 GiB: the reuse check holds one output while the next call
    # runs, so the arena needs a call's peak and one output at the least.
    output, peak = 7_516_192_768, 15_032_385_536
    ev = _evaluation(free=80 * GiB, ref_peak=peak, output=output, limit=4 * peak)
    arena = Evaluation.arena_bytes(ev)
    ev.arena = SimpleNamespace(nbytes=arena)
    held = Evaluation.reuse_calls(ev) - 1
    assert arena >= peak + held * output
    assert arena < 4 * peak  # still within what the device has, not the rule's whole limit


def test_a_device_with_room_gives_the_whole_limit_and_the_outputs_held_past_one_call():
    # The reuse check holds 8 outputs of 0.5 GiB at once, and the drift check's next call runs
    # beside them: 8 outputs past the candidate's own call.
    ev = _evaluation(free=120 * GiB, ref_peak=GiB, output=GiB // 2, limit=5 * GiB)
    assert Evaluation.arena_bytes(ev) == 5 * GiB + 8 * (GiB // 2 + 512)


def test_a_timed_round_of_many_large_outputs_fits_beside_the_limit():
    # tests/tasks/outer_product.py on the H100: 64 MiB out of 32 KiB in, 32 calls a round, the
    # limit its reference + 1 GiB. Capped at the limit, the arena ran out in the first round.
    out = 64 << 20
    ev = _evaluation(free=70 * GiB, ref_peak=out + (32 << 10), output=out, limit=out + GiB)
    ev.calls = 32
    arena = Evaluation.arena_bytes(ev)
    assert arena >= 32 * out + (32 << 10)  # the round's outputs beside the inputs
    assert arena >= ev.limit_bytes() + 31 * out
