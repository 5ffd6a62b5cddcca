"""The judge v3 (issue 30, issue 29): times and memory are the judge's, output reuse is found.

Each exploit of tests/adversarial/ runs with the static checks off: what stops it is the design
(the judge's clock in the judge's process, inputs it writes inside that clock, outputs it reads
itself, the arena, the held-output check), not an AST rule. On CPU the judge's host clock stands
in for the GPU's (`host_clock_for_tests`): the exploits' work is host time, so a forged time
shows as a judged time under the work.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelwright.sandbox import EvalConfig, EvalPool

HERE = Path(__file__).resolve().parent
ZOO = HERE / "adversarial"
AFFINE = str(HERE / "tasks" / "zoo_affine.py")
CUDA = torch.cuda.is_available()
TIMED = EvalConfig(
    host_clock_for_tests=True,
    unsafe_skip_static_checks=True,
    compile_baseline=False,
    reps=5,
    warmup=1,
    drift_calls=2,
)
UNTIMED = EvalConfig(unsafe_skip_static_checks=True, timing=False, drift_calls=2)


@pytest.fixture(scope="module")
def pool():
    with EvalPool(workers=1) as p:
        yield p


def _source(name: str, **constants) -> str:
    text = (ZOO / f"{name}.py").read_text()
    for key, value in constants.items():
        old = next(line for line in text.splitlines() if line.startswith(f"{key} = "))
        text = text.replace(old, f"{key} = {value!r}", 1)
    return text


@pytest.mark.slow
@pytest.mark.parametrize("exploit", ["forged_round_times", "input_draw_work"])
def test_a_forged_time_is_never_the_judged_time(pool, exploit):
    result = pool.submit(AFFINE, _source(exploit), TIMED).result()
    assert result.status == "ok", result.summary()
    work_ms = 5.0  # WORK_S of both exploits, per call
    assert result.timings.candidate.median_ms >= 0.9 * work_ms, result.timings
    assert "judge's clock" in result.timings.note


@pytest.mark.parametrize("ring", [2, 4, 8, 17])
def test_a_ring_of_output_buffers_is_refused_whatever_its_length(pool, ring):
    assert UNTIMED.reuse_calls > ring
    result = pool.submit(AFFINE, _source("ring_buffers", RING=ring), UNTIMED).result()
    assert (result.status, result.rule) == ("rejected", "reuse"), result.summary()


@pytest.mark.parametrize("honest", ["workspace_view_honest"])
def test_fresh_outputs_and_views_of_fresh_workspaces_are_accepted(pool, honest):
    from test_zoo import HONEST_AFFINE

    for source in (HONEST_AFFINE, _source(honest)):
        result = pool.submit(AFFINE, source, UNTIMED).result()
        assert result.status == "ok", result.summary()


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="device memory is measured on CUDA only")
def test_a_hidden_memory_peak_is_measured_from_outside(pool):
    result = pool.submit(AFFINE, _source("hidden_memory_peak"), UNTIMED).result()
    assert result.rule == "memory", result.summary()


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="the judge's GPU clock")
def test_the_judges_clock_on_the_gpu_against_forged_clocks(pool):
    """The forged exploit's judged time against the same kernel without the forgery."""
    from test_zoo import HONEST_AFFINE

    config = EvalConfig(unsafe_skip_static_checks=True, compile_baseline=False, reps=10)
    forged = pool.submit(AFFINE, _source("forged_round_times"), config).result()
    honest_sleep = HONEST_AFFINE.replace(
        "        y = torch.empty_like(x)\n",
        "        import time\n\n        time.sleep(0.005)\n        y = torch.empty_like(x)\n",
    )
    honest = pool.submit(AFFINE, honest_sleep, config).result()
    assert forged.status == honest.status == "ok", (forged.summary(), honest.summary())
    ratio = honest.timings.candidate.median_ms / forged.timings.candidate.median_ms
    assert ratio <= 1.03, (ratio, forged.timings, honest.timings)


OUTER = str(HERE / "tasks" / "outer_product.py")
HONEST_OUTER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _outer_kernel(a_ptr, b_ptr, y_ptr, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    a = tl.load(a_ptr + r, mask=r < rows)
    b = tl.load(b_ptr + c, mask=c < cols)
    offs = r[:, None].to(tl.int64) * cols + c[None, :]
    tl.store(y_ptr + offs, a[:, None] * b[None, :], mask=(r < rows)[:, None] & (c < cols)[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        y = torch.empty(a.shape[0], b.shape[0], device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(a.shape[0], 32), triton.cdiv(b.shape[0], 128))
        _outer_kernel[grid](a, b, y, a.shape[0], b.shape[0], BR=32, BC=128)
        return y
"""


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="device memory is measured on CUDA only")
def test_outputs_a_timed_round_holds_are_not_the_candidates_peak(pool):
    """A 64 MiB output from 32 KiB of inputs, written in microseconds: a timed round holds 32
    outputs (2 GiB) at the judge's demand, past the memory rule's limit (its reference + 1 GiB).
    The honest kernel is accepted and its peak is about its one output and inputs."""
    config = EvalConfig(compile_baseline=False, reps=10)
    result = pool.submit(OUTER, HONEST_OUTER, config).result()
    assert result.status == "ok", result.summary()
    memory = result.memory
    assert memory.candidate_peak_bytes <= memory.limit_bytes, memory
    assert memory.candidate_peak_bytes < 2 * memory.reference_peak_bytes + (64 << 20), memory
    assert "held at the judge's demand" in memory.note, memory.note


def test_the_walls_share_is_measured_on_the_tasks_model_before_the_candidate(pool):
    """The judge times the task's own Model in the candidate's process (before the import) and
    takes only the difference from eager out: never the candidate's own work."""
    from test_zoo import HONEST_AFFINE

    config = TIMED.replace(reps=TIMED.reps + 1)  # a config of its own: nothing kept yet
    result = pool.submit(AFFINE, HONEST_AFFINE, config).result()
    assert result.status == "ok", result.summary()
    note = result.timings.note
    assert "the wall's share" in note and "the task's own Model timed" in note, note
    assert "in the candidate's process before its code was imported" in note, note
    assert "wall" in result.phases_s
    # The second candidate of the task reuses eager's rounds and the wall's share measured in
    # the first one's process, and says so.
    again = pool.submit(AFFINE, HONEST_AFFINE, config).result()
    assert again.status == "ok", again.summary()
    assert "for an earlier candidate of this task" in again.timings.note
    assert "in an earlier candidate's process of this task" in again.timings.note
    assert again.phases_s["baseline"] < 0.5
    assert "wall" not in again.phases_s
