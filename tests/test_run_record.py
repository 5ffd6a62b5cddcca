"""The run's record: finalize builds it once and hands the same object to the report and the
store; the record read back from the run directory is equal to it, and the report's files and
the store's rows are the same from either."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from test_agents_support import EXAMPLES, TASKS, FakePool, make_context, ok_result

from kernelwright.agents import finalize as finalize_mod
from kernelwright.agents.state import Candidate, Idea, Plan, Usage
from kernelwright.agents.tester import evaluate_candidate
from kernelwright.codegen.tunables import tune_constants, with_values
from kernelwright.report.run import write_run_report
from kernelwright.run.record import RunRecord
from kernelwright.run.records import best_kernels, sync_record, sync_run
from kernelwright.run.rundir import KERNEL_PY, PLAN_JSON, best_py_text
from kernelwright.sandbox.results import Environment
from kernelwright.sandbox.task import load_task
from kernelwright.store import Store

GELU = (EXAMPLES / "gelu.py").read_text()
GPU = Environment(device="cuda", gpu="NVIDIA H100", torch="2.11.0", triton="3.6.0")
TASK_HASH = load_task(TASKS / "gelu.py").hash


def _block_time(source: str) -> float:
    """A fake GPU: BLOCK_SIZE 2048 is fastest; NUM_WARPS 8 helps a little."""
    values = {t.name: t.value for t in tune_constants(source)}
    ms = {256: 4.0, 512: 2.0, 1024: 1.0, 2048: 0.5, 4096: 0.8}[values["BLOCK_SIZE"]]
    return ms * (0.9 if values["NUM_WARPS"] == 8 else 1.0)


def _verdict(source: str):
    result = ok_result(median_ms=_block_time(source), eager_ms=2.0)
    return dataclasses.replace(result, environment=GPU, task="gelu", task_hash=TASK_HASH)


@pytest.fixture
def finalized(tmp_path, monkeypatch):
    """A two-round run through the tester and finalize: a candidate the sweep tuned, one it
    kept, and one the coder wrote that was never evaluated. Returns the run's context and the
    records finalize handed to the report and to the store."""
    ctx = make_context(tmp_path, FakePool(_verdict), interpreter=False)
    rd = ctx.rundir
    rd.update_run(
        run_id=rd.run_id,
        task=str(ctx.task.path),
        task_name=ctx.task.name,
        task_hash=ctx.task.hash,
        created="2025-03-01T10:00:00+00:00",
        status="running",
        config=ctx.config.to_dict(),  # devices and shapes are tuples here, lists in run.json
        models=ctx.models(),
        environment={"gpu": GPU.gpu, "device": GPU.device, "interpreter": False},
        profile={"environment": dataclasses.asdict(GPU), "timing_meaningful": True},
    )
    plans = [
        Plan(summary="fuse the gelu", ideas=[Idea(title="one pass", approach="a row a program")]),
        Plan(summary="wider blocks", ideas=[Idea(title="2048", approach="BLOCK_SIZE 2048")]),
    ]
    for n, plan in enumerate(plans, 1):
        rd.write_round_json(n, PLAN_JSON, {"round": n, "source": "rules", **plan.model_dump()})
    seeds = [
        (1, 1, with_values(GELU, {"BLOCK_SIZE": 1024, "NUM_WARPS": 4})),  # the sweep tunes it
        (2, 1, with_values(GELU, {"BLOCK_SIZE": 2048, "NUM_WARPS": 8})),  # already the fastest
    ]
    candidates = []
    for round_no, index, source in seeds:
        rd.write_candidate_file(round_no, index, KERNEL_PY, source)
        candidates.append(
            evaluate_candidate(ctx, Candidate(round=round_no, index=index, source=source))
        )
    pending = with_values(GELU, {"BLOCK_SIZE": 512, "NUM_WARPS": 4})
    rd.write_candidate_file(2, 2, KERNEL_PY, pending)  # killed before its verdict
    candidates.append(Candidate(round=2, index=2, source=pending, idea="2048"))
    handed: dict[str, RunRecord] = {}

    def report(rundir, record):
        handed["report"] = record
        return write_report(rundir, record)

    def store(context, record):
        handed["store"] = record
        return store_record(context, record)

    write_report, store_record = finalize_mod.write_report, finalize_mod.store_record
    monkeypatch.setattr(finalize_mod, "write_report", report)
    monkeypatch.setattr(finalize_mod, "store_record", store)
    state = {
        "profile": {"timing_meaningful": True},
        "candidates": candidates,
        "plans": plans,
        "stop_reason": "rounds",
        "stop_detail": "2 rounds",
        "usage": Usage(),
        "elapsed_s": 12.5,
    }
    ctx.store = Store(tmp_path / "run.db")  # the run's store (the fake pool has no cache key)
    finalize_mod.finalize(state, SimpleNamespace(context=ctx))
    return ctx, handed


def test_finalize_hands_one_record_to_the_report_and_the_store(finalized):
    ctx, handed = finalized
    record = handed["report"]
    assert handed["store"] is record
    assert record.status == "done" and record.stop_reason == "rounds"
    assert [(c.key, c.tuned, c.verdict is not None) for c in record.candidates] == [
        ("round_01/cand_1", True, True),
        ("round_02/cand_1", False, True),
        ("round_02/cand_2", False, False),
    ]
    assert record.plan_summaries == {1: "fuse the gelu", 2: "wider blocks"}
    assert record.best is not None and (record.best.round, record.best.candidate) == (1, 1)
    winner = record.winner
    assert winner is not None and winner.key == "round_01/cand_1"
    assert winner.source == best_py_text(record.candidates[0].tuned_kernel or "")
    assert record.run_config == ctx.config
    assert any(e.get("event") == "finalize" for e in record.events)


def test_the_record_read_back_from_disk_equals_finalizes(finalized):
    ctx, handed = finalized
    loaded = RunRecord.load(ctx.rundir)
    assert loaded == handed["report"]
    assert RunRecord.load(ctx.rundir.path) == loaded


def test_report_and_store_are_the_same_from_either_record(finalized, tmp_path):
    ctx, handed = finalized
    in_memory, loaded = handed["report"], RunRecord.load(ctx.rundir)
    files = write_run_report(in_memory)
    written = {k: p.read_bytes() for k, p in files.items()}
    assert written == {k: p.read_bytes() for k, p in write_run_report(loaded).items()}
    assert b"round_01/cand_1/tuned.py" in written["html"]
    assert b"no result.json (not evaluated yet)" in written["markdown"]

    def rows(name: str, sync) -> tuple[list, list]:
        store = Store(tmp_path / f"{name}.db")
        sync(store)
        return store.runs(limit=None), best_kernels(store)

    from_memory = rows("memory", lambda store: sync_record(store, in_memory))
    assert from_memory == rows("loaded", lambda store: sync_record(store, loaded))
    assert from_memory == rows("path", lambda store: sync_run(store, ctx.rundir.path))
    assert from_memory == (ctx.store.runs(limit=None), best_kernels(ctx.store))
    (run,), (kernel,) = from_memory
    assert run.status == "done" and run.best_speedup_eager == pytest.approx(2.0 / 0.45)
    assert kernel.run_id == ctx.rundir.run_id
    assert kernel.verified == in_memory.finished  # the run's time, whenever it was synced
