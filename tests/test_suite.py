"""`kernelwright suite`: task discovery, an offline suite end to end on CPU (concurrent jobs,
KernelBench metrics, report files, the store), a rerun that skips finished tasks, and the
resume/failure bookkeeping with a scripted optimizer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from test_cli_support import TASKS, kw

from kernelwright.run.config import RunConfig
from kernelwright.sandbox.task import load_task
from kernelwright.store import Store
from kernelwright.suites.suite import STATE_NAME, SuiteRunner, SuiteState, device_groups, suite_key
from kernelwright.suites.tasks import SuiteError, find_tasks, task_label

TASK_TEXT = (TASKS / "gelu.py").read_text()


def test_find_tasks_in_kernelbench_layout_plain_dirs_and_files(tmp_path):
    bench = tmp_path / "bench"
    for name in ("level2/01_b.py", "level1/02_a.py", "level1/01_a.py", "level1/helper.py"):
        (bench / name).parent.mkdir(parents=True, exist_ok=True)
        (bench / name).write_text(TASK_TEXT)
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("b.py", "a.py", "_private.py"):
        (flat / name).write_text(TASK_TEXT)
    found = find_tasks([bench, flat, flat / "a.py"])  # a.py twice: once
    assert [task_label(p) for p in found] == [
        "level1/01_a",
        "level1/02_a",
        "level2/01_b",
        "a",
        "b",
    ]
    with pytest.raises(SuiteError, match="does not exist"):
        find_tasks([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SuiteError, match="no task files in"):
        find_tasks([tmp_path / "empty"])


def test_suite_key_follows_what_changes_the_search_only():
    base = RunConfig(model="offline", out_dir="a", workers=1)
    same = base.replace(out_dir="b", workers=4, db="x", devices=("cuda:1",))
    assert suite_key("h", base) == suite_key("h", same)
    assert suite_key("h", base) != suite_key("h", base.replace(rounds=2))
    assert suite_key("h", base) != suite_key("h2", base)


@pytest.mark.slow
def test_offline_suite_end_to_end_then_a_rerun_skips_finished_tasks(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELWRIGHT_DB", raising=False)
    out, db = tmp_path / "suite", tmp_path / "k.db"
    args = ["suite", TASKS / "gelu.py", TASKS / "softmax.py", "--model", "offline"]
    args += ["--trials", "1", "--jobs", "2", "--out", out, "--db", db]
    code, printed, err = kw(*args)
    assert code == 0, printed + err
    lines = printed.splitlines()
    assert any(line.startswith("tasks: 2, correct: ") for line in lines)
    assert any(line.startswith("fast_p vs eager: fast_0 ") for line in lines)
    assert any(line.startswith("fast_p vs torch.compile: fast_0 ") for line in lines)
    assert any(line.startswith("geometric-mean speedup of correct tasks:") for line in lines)
    table = {
        line.split()[0]: line.split()
        for line in lines
        if line.split()[:1] in (["gelu"], ["softmax"])
    }
    assert table["gelu"][1:3] == ["ok", "yes"]  # the fusion codegen's GELU is verified
    run_dirs = sorted(p for p in out.iterdir() if (p / "run.json").is_file())
    assert {json.loads((p / "run.json").read_text())["task_name"] for p in run_dirs} == {
        "gelu",
        "softmax",
    }
    assert "[gelu] run gelu-" in printed and "[softmax] run softmax-" in printed
    for name in ("suite.md", "suite.html", "suite.json", STATE_NAME):
        assert (out / name).is_file(), name
    # The speedup chart only where there are times (not under the interpreter).
    assert (out / "suite_speedups.png").is_file() == torch.cuda.is_available()
    report = json.loads((out / "suite.json").read_text())
    assert report["summary"]["tasks"] == 2 and report["summary"]["correct"] >= 1
    assert {r.id for r in Store(db).runs()} == {p.name for p in run_dirs}

    code, again, err = kw(*args)
    assert code == 0, again + err
    assert sorted(p for p in out.iterdir() if (p / "run.json").is_file()) == run_dirs
    assert "[gelu] finished earlier in run" in again and "[softmax] finished earlier" in again
    assert "ok (earlier)" in again


# -- bookkeeping with a scripted optimizer --------------------------------------------------------
class ScriptedOptimize:
    """graph.optimize's signature; writes a finished run.json and records how it was called."""

    def __init__(self, fail: set[str] | None = None) -> None:
        self.calls: list[tuple[str | None, str | None]] = []
        self.fail = fail or set()

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
        self.calls.append((task_path, resume))
        if task_path and Path(task_path).stem in self.fail:
            raise RuntimeError("the evaluator fell over")
        run_id = resume or f"{Path(task_path).stem}-{len(self.calls)}"
        if not resume:
            for listener in listeners or []:
                listener({"event": "run.start", "run_id": run_id, "task_name": "t", "path": ""})
        run = {"run_id": run_id, "status": "done", "stop_reason": "exhausted", "best": None}
        run_dir = Path(config.out_dir) / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "run.json").write_text(json.dumps(run))
        return run


def test_an_interrupted_task_resumes_its_own_run(tmp_path):
    config = RunConfig(model="offline", out_dir=str(tmp_path))
    key = suite_key(load_task(TASKS / "gelu.py").hash, config)
    SuiteState(tmp_path / STATE_NAME).put(key, {"task": "gelu", "run_id": "gelu-killed"})
    (tmp_path / "gelu-killed").mkdir()
    (tmp_path / "gelu-killed" / "run.json").write_text("{}")
    optimize = ScriptedOptimize()
    runner = SuiteRunner(optimize, config, io.StringIO())
    (outcome,) = runner.run([TASKS / "gelu.py"])
    assert optimize.calls == [(None, "gelu-killed")]
    assert outcome.run_id == "gelu-killed" and outcome.row["status"] == "exhausted"
    assert SuiteState(tmp_path / STATE_NAME).get(key)["finished"] is True


def test_a_failing_task_is_reported_and_retried_next_time(tmp_path):
    config = RunConfig(model="offline", out_dir=str(tmp_path))
    out = io.StringIO()
    tasks = [TASKS / "gelu.py", TASKS / "softmax.py"]
    first = SuiteRunner(ScriptedOptimize(fail={"gelu"}), config, out).run(tasks, jobs=2)
    assert [o.error for o in first] == ["RuntimeError: the evaluator fell over", ""]
    assert first[0].row == {"task": "gelu", "status": "error", "correct": False, "rule": None}
    assert "[gelu] error: RuntimeError: the evaluator fell over" in out.getvalue()
    optimize = ScriptedOptimize()
    second = SuiteRunner(optimize, config, io.StringIO()).run(tasks)
    assert [c[0] for c in optimize.calls] == [str(tasks[0].resolve())]  # softmax was finished
    assert [o.skipped for o in second] == [False, True]


def test_jobs_get_gpus_of_their_own():
    assert device_groups(2, 2) == [("cuda:0",), ("cuda:1",)]
    assert device_groups(4, 2) == [("cuda:0", "cuda:2"), ("cuda:1", "cuda:3")]
    assert device_groups(2, 5) == [("cuda:0",), ("cuda:1",)]  # never two jobs on one GPU
    assert device_groups(1, 3) == [("cuda:0",)]


def test_concurrent_tasks_never_hold_the_same_gpu(tmp_path):
    import threading
    import time

    held: dict[str, str] = {}
    clashes: list[str] = []
    lock = threading.Lock()

    class Recording(ScriptedOptimize):
        def __call__(self, config, task_path=None, **kw):
            with lock:
                for d in config.devices:
                    if d in held:
                        clashes.append(d)
                    held[d] = str(task_path)
            time.sleep(0.05)  # long enough for the other job to be running too
            with lock:
                for d in config.devices:
                    held.pop(d, None)
            self.seen.append(config.devices)
            return super().__call__(config, task_path, **kw)

    optimize = Recording()
    optimize.seen = []
    config = RunConfig(model="offline", out_dir=str(tmp_path))
    runner = SuiteRunner(optimize, config, io.StringIO(), device_groups=device_groups(2, 2))
    tasks = [
        TASKS / "gelu.py",
        TASKS / "softmax.py",
        TASKS / "layernorm.py",
        TASKS / "sum_reduce.py",
    ]
    outcomes = runner.run(tasks, jobs=4)  # capped at 2: one job per GPU group
    assert clashes == [] and len(outcomes) == 4
    assert sorted(set(optimize.seen)) == [("cuda:0",), ("cuda:1",)]


def test_a_resumed_run_keeps_its_settings_but_takes_this_invocations_gpus(tmp_path, monkeypatch):
    from kernelwright import graph

    first = RunConfig(model="offline", out_dir=str(tmp_path), rounds=2, devices=("cuda:3",))
    assert RunConfig.from_dict(json.loads(json.dumps(first.to_dict()))) == first
    rundir, _, _ = graph.create_run(first, str(TASKS / "gelu.py"), None)
    pools: list = []

    class Stop(Exception):
        pass

    def pool(config, devices=None):
        pools.append(list(config.devices) or None)
        executors.append((config.executor, config.ray_address, config.rounds))
        raise Stop  # enough: the run was opened and its pool asked for

    executors: list = []
    monkeypatch.setattr(graph, "open_evaluator", pool)
    with pytest.raises(Stop):
        graph.optimize(RunConfig(out_dir=str(tmp_path)), resume=rundir.run_id)
    assert pools == [None]  # this invocation named no GPUs: all of them, not the run's cuda:3
    with pytest.raises(Stop):
        graph.optimize(RunConfig(out_dir=str(tmp_path), devices=("cuda:1",)), resume=rundir.run_id)
    assert pools[-1] == ["cuda:1"]
    # The executor is the invocation's too (resumed on a cluster); the search keeps its own.
    here = RunConfig(out_dir=str(tmp_path), executor="ray", ray_address="head:6379")
    with pytest.raises(Stop):
        graph.optimize(here, resume=rundir.run_id)
    assert executors[-1] == ("ray", "head:6379", 2)


@pytest.mark.gpu
def test_suite_on_a_gpu_reports_timed_speedups(tmp_path):
    out = tmp_path / "suite"
    args = ["suite", TASKS / "gelu.py", "--model", "offline", "--trials", "1"]
    code, printed, err = kw(*args, "--out", out, "--db", tmp_path / "k.db")
    assert code == 0, printed + err
    report = json.loads((out / "suite.json").read_text())
    (row,) = report["tasks"]
    assert row["correct"] and row["speedup_eager"] and row["speedup_compiled"]
    assert report["summary"]["timed"] == 1 and report["summary"]["geomean_speedup_eager"]


@pytest.mark.slow
def test_ctrl_c_with_several_jobs_cancels_the_running_evaluations(tmp_path):
    """Ctrl-C reaches only the main thread; the jobs' evaluator pools are cancelled, so the
    suite ends in seconds instead of waiting for candidates that never return."""
    import os
    import signal
    import threading
    import time

    from test_pool import FAST, HANG
    from test_pool import TASK as POOL_TASK

    from kernelwright.sandbox import EvalPool

    ended: list[str] = []

    def hanging(config, task_path=None, **kw):
        with EvalPool(workers=1, devices=["cpu"]) as pool:
            try:
                pool.submit(POOL_TASK, HANG, FAST.replace(timeout_s=300.0)).result()
            finally:
                ended.append(Path(task_path).stem)
        raise AssertionError("a hanging candidate cannot finish")

    config = RunConfig(model="offline", out_dir=str(tmp_path))
    runner = SuiteRunner(hanging, config, io.StringIO())
    timer = threading.Timer(8.0, os.kill, args=(os.getpid(), signal.SIGINT))  # as Ctrl-C does
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        runner.run([TASKS / "gelu.py", TASKS / "softmax.py"], jobs=2)
    assert time.monotonic() - started < 60
    assert sorted(ended) == ["gelu", "softmax"]


def test_stop_after_starts_no_task_past_the_deadline_and_a_rerun_continues(tmp_path):
    import time

    config = RunConfig(model="offline", out_dir=str(tmp_path))
    tasks = [TASKS / "gelu.py", TASKS / "softmax.py", TASKS / "layernorm.py"]

    class Slow(ScriptedOptimize):
        def __call__(self, *a, **kw):
            time.sleep(0.3)
            return super().__call__(*a, **kw)

    first = Slow()
    runner = SuiteRunner(first, config, io.StringIO(), stop_at=time.monotonic() + 0.1)
    outcomes = runner.run(tasks)
    assert [o.not_started for o in outcomes] == [False, True, True]  # the first one finishes
    assert len(first.calls) == 1
    second = ScriptedOptimize()
    again = SuiteRunner(second, config, io.StringIO()).run(tasks)
    assert [o.skipped for o in again] == [True, False, False]
    assert len(second.calls) == 2


def test_redo_runs_matching_finished_tasks_again_and_replaces_their_rows(tmp_path):
    config = RunConfig(model="offline", out_dir=str(tmp_path))
    tasks = [TASKS / "gelu.py", TASKS / "softmax.py", TASKS / "layernorm.py"]
    first = SuiteRunner(ScriptedOptimize(), config, io.StringIO()).run(tasks)
    optimize, out = ScriptedOptimize(), io.StringIO()
    again = SuiteRunner(optimize, config, out, redo=("soft*", "layernorm")).run(tasks)
    assert [o.skipped for o in again] == [True, False, False]
    assert optimize.calls == [(str(tasks[1].resolve()), None), (str(tasks[2].resolve()), None)]
    assert "[softmax] finished earlier in run softmax-2: run again (--redo)" in out.getvalue()
    state = SuiteState(tmp_path / STATE_NAME)
    key = suite_key(load_task(tasks[1]).hash, config)
    assert state.get(key)["run_id"] == again[1].run_id != first[1].run_id
    assert (tmp_path / first[1].run_id / "run.json").is_file()  # the earlier run stays
    # Without --redo the next invocation keeps the new rows.
    third = SuiteRunner(ScriptedOptimize(), config, io.StringIO()).run(tasks)
    assert [o.run_id for o in third] == [first[0].run_id, again[1].run_id, again[2].run_id]


def test_an_interrupted_redo_resumes_its_new_run(tmp_path):
    config = RunConfig(model="offline", out_dir=str(tmp_path))
    SuiteRunner(ScriptedOptimize(), config, io.StringIO()).run([TASKS / "gelu.py"])
    key = suite_key(load_task(TASKS / "gelu.py").hash, config)
    # What a redo leaves when killed mid-run: its run started, not finished.
    SuiteState(tmp_path / STATE_NAME).put(key, {"task": "gelu", "run_id": "gelu-redo"})
    (tmp_path / "gelu-redo").mkdir()
    (tmp_path / "gelu-redo" / "run.json").write_text("{}")
    optimize = ScriptedOptimize()
    SuiteRunner(optimize, config, io.StringIO(), redo=("gelu",)).run([TASKS / "gelu.py"])
    assert optimize.calls == [(None, "gelu-redo")]


def test_cli_redo_says_when_a_pattern_matches_nothing(tmp_path):
    args = [str(TASKS / "gelu.py"), "--model", "offline", "--out", str(tmp_path / "runs")]
    code, _, err = kw("suite", *args, "--stop-after", "0s", "--redo", "level9/*")
    assert code == 0, err
    assert "--redo 'level9/*' matches no task here" in err


def test_a_task_without_candidate_says_why_and_levels_are_summed_apart(tmp_path):
    from kernelwright.commands.suite import summary_lines
    from kernelwright.report.suite import suite_summary
    from kernelwright.suites.suite import task_row

    run = {"run_id": "r", "stop_reason": "no-candidate", "stop_detail": "nothing to fuse: sort"}
    row = task_row("level2/15_sort_rows", tmp_path, run)
    assert row == {
        "task": "level2/15_sort_rows",
        "status": "no-candidate",
        "correct": False,
        "note": "nothing to fuse: sort",
        "evaluator_errors": 0,
        "run_id": "r",
        "ran_on": [],
    }
    ok = {"correct": True, "speedup_eager": 2.0, "speedup_compiled": 1.0}
    lines = summary_lines(suite_summary([row, {"task": "level1/01_relu", **ok}]))
    assert "level1: 1 task, 1 correct, geomean 2.00x vs eager, 1.00x vs torch.compile" in lines
    assert any(line.startswith("level2: 1 task, 0 correct, geomean") for line in lines)


def test_cli_stop_after_reports_what_is_left(tmp_path):
    code, out, err = kw(
        "suite",
        str(TASKS / "gelu.py"),
        str(TASKS / "softmax.py"),
        "--model",
        "offline",
        "--out",
        str(tmp_path / "runs"),
        "--stop-after",
        "0s",
    )
    assert code == 0, err
    assert "2 task(s) not started (--stop-after)" in err
    assert "tasks: 0" in out


def test_one_warm_evaluator_serves_every_task_of_a_job(tmp_path):
    """Tasks of one job share one EvalPool (its workers stay warm between tasks); the suite
    closes it at the end."""

    class Seeing(ScriptedOptimize):
        def __call__(self, *a, pool=None, **kw):
            self.pools.append(pool)
            return super().__call__(*a, **kw)

    optimize = Seeing()
    optimize.pools = []
    config = RunConfig(model="offline", out_dir=str(tmp_path))
    runner = SuiteRunner(optimize, config, io.StringIO())
    runner.run([TASKS / "gelu.py", TASKS / "softmax.py"])
    first, second = optimize.pools
    assert first is not None and first is second
    with pytest.raises(RuntimeError, match="closed"):
        first.submit(TASKS / "gelu.py", "")


def test_a_suite_whose_model_answered_nothing_exits_3(tmp_path, monkeypatch):
    """Issue 13: nightly and CI must notice a run that went offline because no call was answered."""

    class Unanswered(ScriptedOptimize):
        def __call__(self, config, task_path=None, **kwargs):
            run = super().__call__(config, task_path, **kwargs)
            run |= {"models": {"coder": "gpt-4o"}, "llm_unanswered": {"coder": "server: 500"}}
            return run

    from kernelwright import graph

    monkeypatch.setattr(graph, "optimize", Unanswered())
    args = ["suite", TASKS / "gelu.py", "--model", "offline", "--out", tmp_path / "s"]
    code, _, err = kw(*args, "--db", tmp_path / "k.db")
    assert code == 3 and "[gelu] the configured model answered no call for coder (gpt-4o)" in err
    # Not finished: the rerun searches it again (no --redo needed) and may accept it offline.
    code, out, err = kw(*args, "--db", tmp_path / "k.db", "--fallback-offline")
    assert code == 0 and "Accepted (--fallback-offline)" in err and "skipped" not in out
    code, out, _ = kw(*args, "--db", tmp_path / "k.db")
    assert code == 0 and "[gelu] finished earlier in run" in out
