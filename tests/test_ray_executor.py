"""`--executor ray`: a local Ray with two CPU actors evaluating under the interpreter gives the
local pool's verdicts, a job whose actor is killed mid-evaluation still gets its one result, and
a suite interrupted by Ctrl-C resumes with each task run once. The flags and the missing-Ray
error need no Ray."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_cli_support import TASKS
from test_pool import FAST, GOOD
from test_pool import TASK as GELU

from kernelwright.cluster import EXECUTORS, ExecutorError, open_evaluator
from kernelwright.commands.common import UserError, check_executor
from kernelwright.run.config import RunConfig, resolve_config
from kernelwright.sandbox import EvalPool

HERE = Path(__file__).resolve().parent
ZOO = HERE / "adversarial"
AFFINE = HERE / "tasks" / "zoo_affine.py"
# Honest and exploit candidates that are quick under the interpreter, each with its verdict.
CASES = [
    (GELU, GOOD, FAST, ("ok", None)),
    (GELU, "import os\n" + GOOD, FAST, ("rejected", "import")),
    (AFFINE, (ZOO / "nan_output.py").read_text(), None, ("incorrect", "nan")),
    (AFFINE, (ZOO / "input_mutation.py").read_text(), None, ("rejected", "input-mutation")),
    (AFFINE, (ZOO / "hardcoded_sizes.py").read_text(), None, ("incorrect", "variant")),
]
# Enough work that the evaluation is still running when the actor is killed: 8 trials at a
# size of ~1,300 program instances a call (about 1 ms each under the interpreter). With the
# task's own size a warm judge finished before the kill under CI's load, and the test failed.
LONG = FAST.replace(trials=8, shapes={"batch_size": 512})


# -- no Ray needed --------------------------------------------------------------------------------
def test_flags_and_environment_choose_the_executor_without_importing_ray():
    config, _ = resolve_config({}, env={"KERNELWRIGHT_EXECUTOR": "ray"})
    assert config.executor == "ray" and config.max_retries == 2
    config, _ = resolve_config({"executor": "local", "max_retries": 0}, env={})
    assert config.executor == "local" and config.max_retries == 0
    with pytest.raises(ValueError, match="KERNELWRIGHT_EXECUTOR must be one of local, ray"):
        resolve_config({}, env={"KERNELWRIGHT_EXECUTOR": "slurm"})
    assert EXECUTORS == ("local", "ray")
    code = (
        "import sys; from kernelwright.cli import build_parser; "
        "a = build_parser().parse_args(['suite', 'x', '--executor', 'ray', '--ray-address', "
        "'head:6379', '--max-retries', '3']); "
        "assert (a.executor, a.ray_address, a.max_retries) == ('ray', 'head:6379', 3); "
        "from kernelwright.commands.common import search_flags; "
        "assert search_flags(a)['executor'] == 'ray'; "
        "assert 'ray' not in sys.modules, 'the local path imported ray'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(UserError, match=r"pip install 'kernelwright\[ray\]'"):
        check_executor(RunConfig(executor="ray"))
    check_executor(RunConfig())  # the local pool needs nothing
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    monkeypatch.delitem(sys.modules, "kernelwright.cluster.ray_pool", raising=False)
    with pytest.raises(ExecutorError, match=r"pip install 'kernelwright\[ray\]'"):
        open_evaluator(RunConfig(executor="ray"))


def test_a_ray_address_where_nothing_answers_is_refused_in_one_line():
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'kernelwright[ray]')")
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ExecutorError, match=f"no Ray head answers at 127.0.0.1:{port}"):
        open_evaluator(RunConfig(executor="ray", ray_address=f"127.0.0.1:{port}"))
    assert time.monotonic() - started < 10


# -- a local Ray with two CPU actors --------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed (pip install 'kernelwright[ray]')"
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def _kill_busy_actor(pool) -> int:
    """SIGKILL the actor process running a job (as an OOM killer or a lost node would)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        busy = [p for p in pool.placements() if p["busy"]]
        if busy:
            time.sleep(0.3)  # inside the evaluation, not at its edge
            os.kill(busy[0]["pid"], signal.SIGKILL)
            return busy[0]["pid"]
        time.sleep(0.02)
    raise AssertionError("no actor took the job")


class TestRayPool:
    @pytest.fixture(scope="class")
    def pool(self, ray_cluster):
        with open_evaluator(RunConfig(executor="ray", max_retries=1)) as p:
            yield p

    @pytest.mark.slow
    def test_same_verdicts_as_the_local_pool_with_the_node_they_ran_on(self, pool):
        remote = [pool.submit(task, src, cfg) for task, src, cfg, _ in CASES]
        with EvalPool(workers=1, devices=["cpu"]) as local:
            here = [local.submit(task, src, cfg).result() for task, src, cfg, _ in CASES]
            local_env = local.describe()
        there = [f.result(timeout=300) for f in remote]
        for (_, _, _, expected), a, b in zip(CASES, here, there):
            assert (a.status, a.rule) == expected, a.message
            assert (b.status, b.rule) == expected, b.message
            assert (b.task_hash, b.source_hash) == (a.task_hash, a.source_hash)
        ran = [r for r in there if r.rule != "import"]  # a static refusal needs no judge
        assert {r.environment.node for r in ran} == {socket.gethostname()}
        assert {r.environment.key for r in there} == {local_env.key}
        assert pool.describe(GELU).key == local_env.key
        assert len(pool.placements()) == 2

    @pytest.mark.slow
    def test_an_actor_killed_mid_job_still_yields_its_one_result(self, pool):
        retried = pool.stats["retried"]
        future = pool.submit(GELU, GOOD + "\n# killed once\n", LONG)
        killed = _kill_busy_actor(pool)
        result = future.result(timeout=300)
        assert result.status == "ok", result.message
        assert pool.stats["retried"] == retried + 1
        assert killed not in {p["pid"] for p in pool.placements()}
        # the next job still runs: the other actor, or the dead one's replacement
        assert pool.submit(GELU, GOOD, FAST).result(timeout=300).ok

    @pytest.mark.slow
    def test_a_job_lost_more_than_max_retries_is_an_evaluator_error(self, pool):
        pool.max_retries = 0
        try:
            future = pool.submit(GELU, GOOD + "\n# killed for good\n", LONG)
            _kill_busy_actor(pool)
            result = future.result(timeout=300)
        finally:
            pool.max_retries = 1
        assert (result.status, result.rule, result.fault) == ("crashed", "executor", "evaluator")
        assert "died 1 time(s)" in result.message and "--max-retries 0" in result.message
        assert result.task == "gelu" and result.source_hash


@pytest.mark.slow
def test_a_ray_suite_interrupted_by_ctrl_c_resumes_with_each_task_once(ray_cluster, tmp_path):
    from kernelwright.graph import optimize
    from kernelwright.suites.suite import STATE_NAME, SuiteRunner

    tasks = [TASKS / "gelu.py", TASKS / "softmax.py"]
    config = RunConfig(
        model="offline",
        out_dir=str(tmp_path),
        executor="ray",
        rounds=1,
        candidates=1,
        trials=1,
        tune=False,
    )
    alarm: list[threading.Timer] = []

    def interrupt_softmax(config, task_path=None, **kw):
        if task_path and Path(task_path).stem == "softmax":  # mid-evaluation, as Ctrl-C does
            alarm.append(threading.Timer(1.5, os.kill, args=(os.getpid(), signal.SIGINT)))
            alarm[-1].start()
        return optimize(config, task_path, **kw)

    first = SuiteRunner(interrupt_softmax, config, io.StringIO())
    try:
        with pytest.raises(KeyboardInterrupt):
            first.run(tasks)
    finally:
        for timer in alarm:
            timer.cancel()
    state = json.loads((tmp_path / STATE_NAME).read_text())
    done = {e["task"]: e for e in state.values()}
    assert done["gelu"]["finished"] and not done["softmax"].get("finished")
    interrupted = done["softmax"]["run_id"]
    run = json.loads((tmp_path / interrupted / "run.json").read_text())
    assert run["status"] == "interrupted"

    out = io.StringIO()
    outcomes = SuiteRunner(optimize, config, out).run(tasks)
    assert [o.skipped for o in outcomes] == [True, False], out.getvalue()
    assert outcomes[1].run_id == interrupted  # resumed, not started again
    assert outcomes[0].row["status"] == "ok" and outcomes[1].row["status"] in ("ok", "exhausted")
    runs = sorted(p.name for p in tmp_path.iterdir() if (p / "run.json").is_file())
    assert len(runs) == 2  # each task once
    assert outcomes[1].row["ran_on"] == [f"{socket.gethostname()} (cpu)"]
