"""`kernelwright nightly`: a first night searches and records, a later night re-verifies through
the evaluator, a broken kernel fails the night (exit 1) with the report saying why; and, with a
scripted GPU evaluator, a slowdown beyond the threshold triggers a search whose winner replaces
the regressed kernel."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch
from test_cli_support import EXAMPLES, FAST, TASKS, kw

from kernelwright.run.config import RunConfig
from kernelwright.sandbox.results import Environment, EvalResult, Timing, Timings
from kernelwright.store import Store
from kernelwright.suites.nightly import Nightly, failed

GELU = TASKS / "gelu.py"
# The example GELU with a wrong cubic coefficient: every element off by a little.
WRONG = (EXAMPLES / "gelu.py").read_text().replace("0.044715", "0.07")


def nightly(tmp_path: Path, night: str, *extra: str) -> tuple[int, str, str]:
    return kw(
        "nightly", GELU, *FAST, "--db", tmp_path / "k.db", "--out", tmp_path / "runs",
        "--night", night, *extra,
    )  # fmt: skip


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter semantics; see the gpu test")
@pytest.mark.slow
def test_first_night_searches_later_nights_reverify_and_a_broken_kernel_fails(tmp_path):
    code, out, err = nightly(tmp_path, "2026-01-01")
    assert code == 0, out + err
    assert "[gelu] no known kernel; searched in run gelu-" in out
    if not torch.cuda.is_available():
        assert "no CUDA GPU here: correctness only" in err
    store = Store(tmp_path / "k.db")
    (first,) = store.history()
    assert (first.night, first.status, first.task_name) == ("2026-01-01", "ok", "gelu")
    assert (tmp_path / "nightly" / "2026-01-01" / "nightly.md").is_file()

    code, out, err = nightly(tmp_path, "2026-01-02", "--no-search")
    assert code == 0, out + err
    assert "[gelu] verified: ok" in out and "nightly 2026-01-02: 1 task(s), no regression" in out

    # Someone's "improvement" broke the kernel the store holds: tonight's check must catch it.
    best = store.best_kernel(first.task_hash, first.env_key, first.variant)
    store.set_best_kernel(WRONG, best.result, variant=best.variant, only_if_better=False)
    code, out, err = nightly(tmp_path, "2026-01-03", "--no-search")
    assert code == 1
    assert "[gelu] REGRESSION: now incorrect" in out
    assert "nightly 2026-01-03: 1 of 1 task(s) regressed or failed: gelu" in err
    report = (tmp_path / "nightly" / "2026-01-03" / "nightly.md").read_text()
    assert "1 regression among 1 kernel" in report and "now incorrect" in report
    assert [h.status for h in store.history()] == ["ok", "ok", "incorrect"]


# -- a scripted GPU -------------------------------------------------------------------------------
ENV = Environment(device="cuda", gpu="FakeGPU", torch="2.11", triton="3.6")
OLD = "# the kernel known from earlier nights\n"
NEW = "# tonight's search found this one\n"


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p25_ms=ms, p75_ms=ms, min_ms=ms, max_ms=ms, reps=50)


class TimedPool:
    """EvalPool's submit/describe; each source's median time comes from `times` (eager 10 ms)."""

    def __init__(self, times: dict[str, float]) -> None:
        self.times = times
        self.judged: list[str] = []

    def describe(self, task=None) -> Environment:
        return ENV

    def submit(self, task, source, config) -> Future:
        self.judged.append(source)
        ms = self.times[source]
        effective = dataclasses.replace(task, overrides={**task.overrides, **config.shapes})
        result = EvalResult(
            status="ok",
            task="gelu",
            task_hash=effective.hash,
            source_hash=hashlib.sha256(source.encode()).hexdigest(),
            environment=ENV,
            timings=Timings(meaningful=True, candidate=timing(ms), eager=timing(10.0)),
            speedup_eager=10.0 / ms,
        )
        future: Future = Future()
        future.set_result(result)
        return future


class ScriptedSearch:
    """graph.optimize's signature: a finished run whose winner is NEW."""

    def __init__(self, pool: TimedPool) -> None:
        self.pool, self.runs = pool, 0

    def __call__(
        self,
        config,
        task_path=None,
        *,
        task=None,
        store=None,
        resume=None,
        answer=None,
        listeners=None,
        pool=None,
    ):
        from kernelwright.run.records import sync_run
        from kernelwright.sandbox.task import load_task

        self.runs += 1
        run_id = f"gelu-search-{self.runs}"
        run_dir = Path(config.out_dir) / run_id
        cand = run_dir / "round_01" / "cand_1"
        cand.mkdir(parents=True)
        task = load_task(task_path, config.shapes)
        result = self.pool.submit(task, NEW, config).result()
        (cand / "kernel.py").write_text(NEW)
        (cand / "result.json").write_text(result.to_json())
        (run_dir / "best.py").write_text(NEW)
        run = {
            "run_id": run_id,
            "task": str(task_path),
            "task_name": "gelu",
            "task_hash": task.hash,
            "status": "done",
            "stop_reason": "patience",
            "config": config.to_dict(),
            "profile": {"environment": dataclasses.asdict(ENV)},
            "best": {"round": 1, "candidate": 1, "path": "best.py", "speedup_eager": 2.5},
        }
        (run_dir / "run.json").write_text(json.dumps(run))
        if store is not None:  # as graph.optimize's finalize does
            sync_run(store, run_dir)
        return run


def test_a_slowdown_beyond_the_threshold_is_a_regression_and_triggers_a_search(tmp_path):
    store = Store(tmp_path / "k.db")
    pool = TimedPool({OLD: 5.0, NEW: 4.0})
    search = ScriptedSearch(pool)
    config = RunConfig(model="offline", out_dir=str(tmp_path / "runs"), db=str(tmp_path / "k.db"))

    def night(date: str) -> list:
        job = Nightly(search, config, store, pool, io.StringIO(), night=date, cuda=True)
        return job.run([GELU])

    task_hash = pool.submit(_gelu(), OLD, config).result().task_hash
    store.set_best_kernel(OLD, pool.submit(_gelu(), OLD, config).result(), variant="fp32")
    (one,) = night("2026-02-01")
    assert not one.regression and one.searched is None and search.runs == 0

    pool.times[OLD] = 6.0  # 20% slower than last night: beyond the 10% threshold
    (two,) = night("2026-02-02")
    assert two.regression and two.change["reason"] == "20% slower than 2026-02-01"
    assert failed([two]) == [two]
    assert two.searched == "gelu-search-1" and two.new_best.speedup_eager == 2.5
    assert store.best_kernel(task_hash, ENV.key, "fp32").source == NEW
    assert "REGRESSION: 20% slower than 2026-02-01; searched in run gelu-search-1" in two.line()

    pool.times[OLD] = 4.4  # only 10% slower than the night before: no regression (strict >)
    store.set_best_kernel(OLD, pool.submit(_gelu(), OLD, config).result(), only_if_better=False)
    (three,) = night("2026-02-03")
    assert not three.regression and search.runs == 1
    # Re-verification always measures again (never the cache): 3 set-up calls above, plus one
    # evaluation of OLD per night.
    assert pool.judged.count(OLD) == 3 + 3


def _gelu():
    from kernelwright.sandbox.task import load_task

    return load_task(GELU)


@pytest.mark.gpu
def test_nights_on_a_gpu_record_kernel_times(tmp_path):
    """Two nights re-time a known kernel on the GPU: each history row has its median time."""
    from kernelwright.sandbox import evaluate

    result = evaluate(GELU, (EXAMPLES / "gelu.py").read_text())
    assert result.ok and result.timings.meaningful
    Store(tmp_path / "k.db").set_best_kernel((EXAMPLES / "gelu.py").read_text(), result)
    for date in ("2026-03-01", "2026-03-02"):
        # A generous threshold: this test is about recording, not about a quiet GPU.
        code, out, err = nightly(tmp_path, date, "--no-search", "--slowdown", "10")
        assert code == 0, out + err
    rows = Store(tmp_path / "k.db").history()
    assert [r.night for r in rows] == ["2026-03-01", "2026-03-02"]
    assert all(r.candidate_ms and r.speedup_eager for r in rows)
    assert rows[0].env_key.split("|")[0] == torch.cuda.get_device_name(0)


def test_a_second_run_on_one_night_compares_with_the_first(tmp_path):
    store = Store(tmp_path / "k.db")
    pool = TimedPool({OLD: 5.0})
    search = ScriptedSearch(pool)
    config = RunConfig(model="offline", out_dir=str(tmp_path / "runs"), db=str(tmp_path / "k.db"))
    store.set_best_kernel(OLD, pool.submit(_gelu(), OLD, config).result(), variant="fp32")

    def night(date: str) -> list:
        job = Nightly(search, config, store, pool, io.StringIO(), night=date, cuda=True)
        return job.run([GELU])

    (first,) = night("2026-03-01")
    assert first.change["previous_night"] is None  # the very first run: nothing before it
    pool.times[OLD] = 6.0
    (again,) = night("2026-03-01")  # the same day, 20% slower
    assert again.change["previous_night"] == "2026-03-01"
    assert again.regression and again.change["reason"] == (
        "20% slower than the earlier run of 2026-03-01"
    )
    assert len(store.history()) == 2  # the first run's row was kept, not replaced


class CrashingPool(TimedPool):
    """The evaluator fails on its own (a bug, a worker that cannot start) for `crash` sources."""

    def __init__(self, times: dict[str, float], crash: set[str]) -> None:
        super().__init__(times)
        self.crash = crash

    def submit(self, task, source, config) -> Future:
        if source not in self.crash:
            return super().submit(task, source, config)
        self.judged.append(source)
        effective = dataclasses.replace(task, overrides={**task.overrides, **config.shapes})
        future: Future = Future()
        future.set_result(
            EvalResult(
                status="crashed",
                rule="worker-start",
                message="the evaluator's worker process died while starting",
                task="gelu",
                task_hash=effective.hash,
                environment=ENV,
            )
        )
        return future


def test_an_evaluator_error_fails_the_night_but_is_no_regression_and_keeps_the_kernel(tmp_path):
    store = Store(tmp_path / "k.db")
    pool = CrashingPool({OLD: 5.0, NEW: 4.0}, crash=set())
    search = ScriptedSearch(pool)
    config = RunConfig(model="offline", out_dir=str(tmp_path / "runs"), db=str(tmp_path / "k.db"))
    task_hash = pool.submit(_gelu(), OLD, config).result().task_hash
    store.set_best_kernel(OLD, pool.submit(_gelu(), OLD, config).result(), variant="fp32")

    def night(date: str) -> list:
        job = Nightly(search, config, store, pool, io.StringIO(), night=date, cuda=True)
        return job.run([GELU]), job

    night("2026-04-01")
    pool.crash = {OLD}
    (broken,), job = night("2026-04-02")
    assert broken.evaluator_error and not broken.regression and failed([broken]) == [broken]
    assert "NOT CHECKED: evaluator error [worker-start]" in broken.line()
    # No search replaced the kernel because kernelwright failed to measure it.
    assert search.runs == 0 and store.best_kernel(task_hash, ENV.key, "fp32").source == OLD
    summary = json.loads(job.write_report([broken], tmp_path / "report")["json"].read_text())
    assert (summary["regressions"], summary["evaluator_errors"]) == (0, 1)
    pool.crash = set()
    pool.times[OLD] = 6.0  # the next night compares with the last night that measured
    (later,), _ = night("2026-04-03")
    assert later.change["previous_night"] == "2026-04-01" and later.regression


@pytest.mark.slow
def test_a_night_whose_model_answered_nothing_exits_3(tmp_path, monkeypatch):
    """Issue 13: a search that went offline because the endpoint answered nothing fails the
    night's exit code (3), not silently 0."""
    from kernelwright import graph

    def unanswered(config, task_path=None, **kwargs):
        run_id = f"{Path(task_path).stem}-1"
        run = {"run_id": run_id, "status": "done", "best": None, "models": {"coder": "gpt-4o"}}
        run["llm_unanswered"] = {"coder": "server: server error (500)"}
        (Path(config.out_dir) / run_id).mkdir(parents=True)
        (Path(config.out_dir) / run_id / "run.json").write_text(json.dumps(run))
        return run

    monkeypatch.setattr(graph, "optimize", unanswered)
    code, out, err = nightly(tmp_path, "2026-01-01", "--model", "offline")
    assert code == 3, out + err
    assert "[gelu] the configured model answered no call for coder (gpt-4o)" in err
