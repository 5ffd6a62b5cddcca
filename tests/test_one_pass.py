"""One pass per run (issue 26): the graph's state holds the judge's verdict typed, through the
SQLite checkpointer too (old checkpoints with the plain dict included); a command opens its
results store once and the run syncs into it once; the task file is parsed once per run."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
import sys
from collections import Counter
from concurrent.futures import Future

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from pydantic import BaseModel
from test_agents_support import FakePool, ok_result
from test_cli_support import TASKS, kw

from kernelwright import graph
from kernelwright.agents.state import Candidate
from kernelwright.sandbox.judge.pool import source_hash
from kernelwright.sandbox.results import (
    Correctness,
    Environment,
    EvalResult,
    KernelStats,
    Mismatch,
    Roofline,
    Timings,
)
from kernelwright.sandbox.task import parse
from kernelwright.store import Store

GELU = TASKS / "gelu.py"


def verdict() -> EvalResult:
    """A verdict with every kind of part: nested records, tuples of tuples, a NaN."""
    mismatch = Mismatch("out", 3, 4096, 0.5, float("nan"), (((1, 7), 0.0, 0.4),))
    return EvalResult(
        status="incorrect",
        rule="mismatch",
        message="3 of 4096 elements differ",
        task="gelu",
        source_hash="abc",
        shape_overrides={"N": 64, "kernel_size": (3, 5)},
        correctness=Correctness(trials=2, seeds=(1, 2), mismatch=mismatch, err_vs_fp64=1e-3),
        timings=Timings(meaningful=False, note="interpreter"),
        roofline=Roofline(1024, 0, 3000.0, 60.0, 0.001, "memory", fraction=0.5),
        kernels=(KernelStats("gelu_kernel", num_warps=4, spills=0, launches=1),),
        environment=Environment(device="cpu", torch="2.11", isolation=("bubblewrap",)),
        notes=("a note",),
    )


def same(a: EvalResult, b: EvalResult) -> bool:
    """Equal verdicts (NaN compares unequal to itself: compared as their JSON)."""
    return a.to_json() == b.to_json()


def through_checkpointer(tmp_path, values: dict) -> dict:
    """`values` written as a checkpoint by the run's SQLite saver and read back."""
    with sqlite3.connect(tmp_path / "checkpoint.sqlite", check_same_thread=False) as conn:
        saver = graph.sqlite_saver(conn)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = {k: 1 for k in values}
        thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        saver.put(thread, checkpoint, {"source": "loop", "step": 1}, {k: 1 for k in values})
        return saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["channel_values"]


def test_a_checkpoint_keeps_the_candidates_verdict_typed(tmp_path):
    cand = Candidate(round=1, index=1, source="x", status="incorrect", result=verdict())
    (back,) = through_checkpointer(tmp_path, {"candidates": [cand]})["candidates"]
    assert isinstance(back, Candidate) and isinstance(back.result, EvalResult)
    assert same(back.result, verdict())
    assert back.result.correctness.mismatch.first_bad == (((1, 7), 0.0, 0.4),)
    assert math.isnan(back.result.correctness.mismatch.max_rel_err)
    assert back.roofline_fraction == 0.5 and back.result.kernels[0].name == "gelu_kernel"


def test_a_checkpoint_written_when_the_verdict_was_a_dict_revives_it_typed(tmp_path):
    """Runs checkpointed before the typed field (result: EvalResult.to_dict()) still resume."""

    class OldCandidate(BaseModel):  # agents.state.Candidate as it was, result a plain dict
        round: int
        index: int
        source: str | None = None
        status: str = "pending"
        result: dict | None = None

    OldCandidate.__module__, OldCandidate.__name__ = Candidate.__module__, "Candidate"
    old = OldCandidate(round=2, index=1, source="x", status="incorrect", result=verdict().to_dict())
    (back,) = through_checkpointer(tmp_path, {"candidates": [old]})["candidates"]
    assert type(back) is Candidate and isinstance(back.result, EvalResult)
    assert same(back.result, verdict()) and back.key == "round_02/cand_1"


def test_a_candidate_refuses_a_verdict_that_is_not_one():
    with pytest.raises(ValueError, match="not an EvalResult"):
        Candidate(round=1, index=1, result={"speedup_eager": 2.0})  # no status: no verdict


# -- one store, one sync, one parse per run -------------------------------------------------------
class LocalPool(FakePool):
    """The fake evaluator as the commands open it (a context manager that describes itself)."""

    def describe(self, task=None) -> Environment:
        return Environment(device="cpu", torch="2.11", triton="3.6")

    def submit(self, task, source, config=None) -> Future:
        """An ok verdict that is the candidate's own (the store keeps it as a best kernel)."""
        result = dataclasses.replace(
            ok_result(),
            task=task.name,
            task_hash=task.hash,
            source_hash=source_hash(source),
            environment=self.describe(task),
        )
        future: Future = Future()
        future.set_result(result)
        return future

    def close(self, cancel: bool = False) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


@pytest.fixture
def counted(monkeypatch):
    """Counts of Store opens, run syncs (Store.update_run: only records.sync_record calls it)
    and task-file parses (load_task's parse of the file; the modules that call load_task bind
    it by name, so its parse is what is counted), per test."""
    counts: Counter = Counter()
    pool = LocalPool()

    def wrap(owner, name, key, caller=None):
        original = getattr(owner, name)

        def counting(*a, **k):
            if caller is None or sys._getframe(1).f_code.co_name == caller:
                counts[key] += 1
            return original(*a, **k)

        monkeypatch.setattr(owner, name, counting)

    wrap(Store, "__init__", "opens")
    wrap(Store, "update_run", "syncs")
    wrap(parse, "_parse", "parses", caller="load_task")
    monkeypatch.setattr("kernelwright.cluster.open_evaluator", lambda config, devices=None: pool)
    monkeypatch.setattr(graph, "open_evaluator", lambda config, devices=None: pool)
    monkeypatch.delenv("KERNELWRIGHT_DB", raising=False)
    return counts


OFFLINE = ["--model", "offline", "--rounds", "1", "--candidates", "1", "--trials", "1"]


def test_optimize_opens_the_store_once_syncs_the_run_once_and_parses_the_task_once(
    tmp_path, counted
):
    db = tmp_path / "k.db"
    code, out, err = kw("optimize", GELU, "--out", tmp_path / "runs", "--db", db, *OFFLINE)
    assert code == 0, out + err
    assert (counted["opens"], counted["syncs"], counted["parses"]) == (1, 1, 1)
    (run,) = Store(db).runs()
    assert run.status == "done"  # the one sync, finalize's, is the run's last word


def test_a_resumed_run_is_read_once_and_synced_once(tmp_path, counted):
    runs, db = tmp_path / "runs", tmp_path / "k.db"
    code, out, err = kw("optimize", GELU, "--out", runs, "--db", db, *OFFLINE)
    assert code == 0, out + err
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    counted.clear()
    code, out, err = kw("optimize", "--resume", run_dir.name, "--out", runs)
    assert code == 0, out + err
    assert "nothing to resume" in out
    assert (counted["opens"], counted["syncs"], counted["parses"]) == (1, 1, 1)


def test_a_suite_parses_each_task_once_and_syncs_each_run_once(tmp_path, counted):
    tasks = [GELU, TASKS / "softmax.py"]
    out_dir, db = tmp_path / "suite", tmp_path / "k.db"
    code, out, err = kw("suite", *tasks, "--out", out_dir, "--db", db, *OFFLINE)
    assert code == 0, out + err
    assert (counted["opens"], counted["syncs"], counted["parses"]) == (1, 2, 2)
    assert {r.status for r in Store(db).runs()} == {"done"}


def test_a_night_parses_its_task_once_and_syncs_its_search_once(tmp_path, counted):
    out_dir, db = tmp_path / "runs", tmp_path / "k.db"
    code, out, err = kw("nightly", GELU, "--out", out_dir, "--db", db, "--night", "2026-01-01",
                        *OFFLINE)  # fmt: skip
    assert code == 0 and "no regression" in out, out + err
    assert (counted["opens"], counted["syncs"], counted["parses"]) == (1, 1, 1)


def test_a_chat_opens_one_store_and_parses_its_task_once(tmp_path, counted):
    runs, db = tmp_path / "runs", tmp_path / "k.db"
    code, out, err = kw("chat", GELU, "--out", runs, "--db", db, *OFFLINE, stdin="/quit\n")
    assert code == 0, out + err
    # Two graph invocations (round 1 to the person's turn, then /quit): one sync each.
    assert (counted["opens"], counted["syncs"], counted["parses"]) == (1, 2, 1)
    (run,) = Store(db).runs()
    assert run.status == "done"


def test_finalize_takes_the_judged_candidates_from_the_state_not_their_files(
    tmp_path, counted, monkeypatch
):
    """The run's record holds the tester's verdicts as the state has them: result.json is not
    read back (issue 26: a result went round in circles), and the record is the same as one
    read from the run directory afterwards."""
    from kernelwright.agents import finalize
    from kernelwright.run import record as record_module

    reads: list = []
    real_load = record_module._load_result
    monkeypatch.setattr(record_module, "_load_result", lambda p: reads.append(p) or real_load(p))
    kept: list = []
    real_report = finalize.write_report
    monkeypatch.setattr(
        finalize, "write_report", lambda rd, r: kept.append(r) or real_report(rd, r)
    )
    runs = tmp_path / "runs"
    code, out, err = kw("optimize", GELU, "--out", runs, "--db", tmp_path / "k.db", *OFFLINE)
    assert code == 0, out + err
    (held,) = kept
    assert held.candidates and reads == []
    monkeypatch.setattr(record_module, "_load_result", real_load)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    from_files = record_module.RunRecord.load(run_dir)
    assert [(c.key, c.kernel, c.source) for c in held.candidates] == [
        (c.key, c.kernel, c.source) for c in from_files.candidates
    ]
    for a, b in zip(held.candidates, from_files.candidates):
        assert a.verdict is not None and b.verdict is not None
        assert a.verdict.to_dict() == b.verdict.to_dict()


def test_a_tuned_candidate_keeps_its_seeds_verdict_in_the_state():
    from kernelwright.agents.finalize import judged_records

    seed, tuned = verdict(), dataclasses.replace(verdict(), speedup_eager=3.0)
    cand = Candidate(
        round=1,
        index=2,
        source="seed",
        tuned_source="tuned",
        result=tuned,
        seed_result=seed,
        status="ok",
        eval_finished=1.0,
    )
    (record,) = judged_records([cand]).values()
    assert record.tuned and record.result is seed and record.verdict is tuned
    assert record.source == "tuned" and record.kernel == "seed"
    older = cand.model_copy(update={"seed_result": None})  # a checkpoint from before the field
    duplicate = cand.model_copy(update={"index": 3, "duplicate_of": "round_01/cand_2"})
    assert judged_records([older, duplicate]) == {}
