"""EvalPool mechanics: one result per submission, workers replaced after faults, limits enforced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelwright.sandbox import EvalConfig, EvalPool
from kernelwright.sandbox.crossing.isolation import worker_env
from kernelwright.sandbox.judge.summary import format_baseline

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tests" / "tasks" / "gelu.py"
GOOD = (ROOT / "prompts" / "examples" / "gelu.py").read_text()
# Small shapes and few calls: these tests are about the pool, not the candidate.
FAST = EvalConfig(shapes={"batch_size": 4, "dim": 300}, trials=1, drift_calls=1)

HANG = GOOD.replace(
    "    def forward(self, x",
    "    def forward(self, x, *rest):\n"
    "        while True:\n"
    "            pass\n\n"
    "    def _unused(self, x",
)
# Writes a forged "ok" reply to every descriptor that might be the result channel (it keeps the
# parent's number, which is high in a busy test process). It cannot know the request's nonce, so
# the pool must refuse it rather than trust it.
FORGE = "import os\n" + GOOD.replace(
    "class ModelNew",
    "for _fd in range(3, 4096):\n"
    "    try:\n"
    '        os.write(_fd, b\'{"type": "result", "id": "x", "nonce": "guess", \'\n'
    '                 b\'"result": {"status": "ok"}}\\n\')\n'
    "    except OSError:\n"
    "        pass\n\n\nclass ModelNew",
)
# Grows resident memory past a 1 GB cap in small steps (the kernel only sees RSS, not a limit).
HOG = GOOD.replace(
    "    def forward(self, x",
    "    def forward(self, x, *rest):\n"
    "        hog = []\n"
    "        while True:\n"
    "            hog.append(torch.ones(64 * 2**20 // 4))\n\n"
    "    def _unused(self, x",
)


@pytest.fixture(scope="module")
def pool():
    with EvalPool(workers=2, devices=["cpu"]) as p:
        yield p


@pytest.mark.slow
def test_good_candidate_is_ok_and_round_trips_as_json(pool):
    result = pool.submit(TASK, GOOD, FAST).result()
    assert result.status == "ok", result.message
    assert result.environment.interpreter and "audit-hook" in result.environment.isolation
    assert result.timings is not None and not result.timings.meaningful
    assert result.correctness.variant_checked
    steps = result.phases_s
    assert {"load", "trials", "same_address", "drift", "variant"} <= set(steps), steps
    assert all(v >= 0 for v in steps.values()) and sum(steps.values()) <= result.wall_s
    again = type(result).from_json(result.to_json())
    assert again.to_json() == result.to_json()


def test_static_rejection_needs_no_worker():
    with EvalPool(workers=1, devices=["cpu"]) as p:
        result = p.submit(TASK, "import os\n" + GOOD, FAST).result()
        assert p.stats["started"] == 0
    assert result.status == "rejected" and result.rule == "import"
    assert "line 1" in result.message


def test_evaluate_after_the_default_pool_was_cancelled_starts_a_new_one():
    """A Ctrl-C in a suite run from Python cancels every open pool (cancel_open_pools), the
    default one too; this module's own pool must live on, so only the default is cancelled."""
    from kernelwright import sandbox

    assert sandbox.evaluate(TASK, "import os\n" + GOOD, FAST).rule == "import"
    sandbox._pool().cancel()
    assert sandbox.evaluate(TASK, "import os\n" + GOOD, FAST).rule == "import"


def test_syntax_error_is_a_compile_error(pool):
    result = pool.submit(TASK, GOOD + "\ndef broken(:\n", FAST).result()
    assert result.status == "compile_error" and result.rule == "syntax"


@pytest.mark.slow
def test_hang_is_killed_and_the_pool_goes_on(pool):
    hang = pool.submit(TASK, HANG, FAST.replace(timeout_s=4)).result()
    assert hang.status == "timeout" and hang.rule == "wall-time"
    assert pool.submit(TASK, GOOD, FAST).result().status == "ok"


@pytest.mark.slow
def test_every_submission_gets_its_own_result_under_concurrency(pool):
    sources = [GOOD, HANG, GOOD, "import socket\n" + GOOD, GOOD, HANG]
    config = FAST.replace(timeout_s=4)
    futures = [pool.submit(TASK, s, config) for s in sources]
    statuses = [f.result(timeout=300).status for f in futures]
    assert statuses == ["ok", "timeout", "ok", "rejected", "ok", "timeout"]


def test_forged_reply_on_the_result_channel_is_refused(pool):
    config = FAST.replace(unsafe_skip_static_checks=True)
    result = pool.submit(TASK, FORGE, config).result()
    # Either the guard stops the write outright, or the pool sees a reply without its nonce.
    assert result.status != "ok"
    assert result.rule in ("protocol", "sandbox-file")


def test_host_memory_cap_kills_the_worker(pool):
    # The candidate process's RLIMIT_DATA is off here: the judge's polling of its resident
    # memory is the layer under test (tests/test_sandbox_wall.py has both).
    config = FAST.replace(host_memory_gb=1.0, timeout_s=60, host_rlimit=False)
    result = pool.submit(TASK, HOG, config).result()
    assert result.status == "crashed" and result.rule == "memory"
    assert "host memory" in result.message
    capped = pool.submit(TASK, HOG, config.replace(host_rlimit=True)).result()
    assert (capped.status, capped.rule) == ("runtime_error", "memory"), capped.summary()
    assert pool.submit(TASK, GOOD, FAST).result().status == "ok"


# A reference that imports a module lazily, as torch.compile or the profiler do: it must never
# find one the candidate wrote into its working directory (with it, the output would be zero).
LAZY_IMPORT_TASK = TASK.read_text().replace(
    '        return torch.nn.functional.gelu(x, approximate="tanh")',
    "        try:\n"
    "            import kw_planted_probe  # noqa: F401\n"
    "        except ImportError:\n"
    '            return torch.nn.functional.gelu(x, approximate="tanh")\n'
    "        return x * 0.0",
)
PLANTER = GOOD.replace(
    "        super().__init__()\n",
    "        super().__init__()\n"
    '        with open("kw_planted_probe.py", "w") as f:  # its cwd: a write the sandbox allows\n'
    '            f.write("PLANTED = True\\n")\n',
    1,
)


def test_a_module_planted_in_the_home_is_never_imported(pool, tmp_path):
    """`python -m` puts the cwd (the candidate's home) first on sys.path; the worker drops it, so
    a module the candidate writes there cannot shadow one the evaluator imports later."""
    task = tmp_path / "lazy_import.py"
    task.write_text(LAZY_IMPORT_TASK)
    assert PLANTER != GOOD and TASK.read_text() != LAZY_IMPORT_TASK
    config = FAST.replace(unsafe_skip_static_checks=True)  # open() is refused statically
    result = pool.submit(task, PLANTER, config).result()
    assert result.status == "ok", result.summary()


def test_describe_reports_the_environment(pool):
    env = pool.describe()
    assert env.torch and env.triton and env.device == "cpu"


def test_baseline_on_cpu_says_times_are_not_meaningful(pool):
    b = pool.submit_baseline(TASK, FAST).result()
    assert b.status == "ok" and not b.timings.meaningful
    # The per-op profile the planner reads: the task is one GELU.
    assert b.ops and b.ops[0].name == "aten::gelu" and b.ops[0].calls == 1
    assert abs(sum(o.share for o in b.ops) - 1.0) < 1e-6
    # Where the set-up time goes, step by step (on a GPU also work count, ceilings, torch.compile
    # and timing), and the summary line that shows it.
    assert {"reference", "input_checks", "op_breakdown"} <= set(b.setup_s)
    assert all(v >= 0 for v in b.setup_s.values())
    assert "setup (s): reference " in format_baseline(b)


def test_worker_environment_keeps_no_secrets(tmp_path):
    parent = {
        "PATH": "/usr/bin",
        "OPENAI_API_KEY": "sk-x",
        "TRITON_API_TOKEN": "t",
        "AWS_SECRET_ACCESS_KEY": "a",
        "TRITON_CACHE_DIR": "/x",
        "HOME": "/root",
    }
    env = worker_env(parent, home=tmp_path, private=tmp_path / "evaluator", device="cpu")
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert "TRITON_API_TOKEN" not in env  # an allowed prefix does not let a token through
    assert env["HOME"] == str(tmp_path) and env["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    assert env["TRITON_INTERPRET"] == "1"
    # Device ceilings are measured once per machine: the user's cache, not the throwaway home.
    assert env["KERNELWRIGHT_CACHE_DIR"] == "/root/.cache/kernelwright"
    mine = worker_env(
        {**parent, "KERNELWRIGHT_CACHE_DIR": "/c"}, home=tmp_path, private=tmp_path, device="cpu"
    )
    assert mine["KERNELWRIGHT_CACHE_DIR"] == "/c"


def test_cli_eval_reports_and_exits(tmp_path):
    bad = tmp_path / "cand.py"
    bad.write_text("import subprocess\n" + GOOD)
    args = [sys.executable, "-m", "kernelwright.cli", "eval", str(TASK)]
    shapes = ["--shape", "batch_size=4", "--shape", "dim=300", "--trials", "1"]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [*args, str(bad), *shapes, "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 1
    assert json.loads(out.stdout)["rule"] == "import"
    missing = subprocess.run(
        [*args, str(tmp_path / "nope.py")], capture_output=True, text=True, env=env, timeout=120
    )
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow
def test_an_interrupt_cancels_running_and_queued_evaluations_at_once():
    """Ctrl-C (or any error) inside `with EvalPool()`: the evaluation in flight is killed and
    the queued one dropped, both Futures cancelled (a killed evaluation is no verdict), and the
    pool is gone in seconds instead of after the hanging candidate's timeout."""
    patient = FAST.replace(timeout_s=300.0)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), EvalPool(workers=1, devices=["cpu"]) as pool:
        running = pool.submit(TASK, HANG, patient)
        queued = pool.submit(TASK, GOOD, patient)
        while pool.environment is None and time.monotonic() - started < 60:
            time.sleep(0.1)  # until the worker reports ready
        time.sleep(2.0)  # it is in the candidate's endless forward now
        raise KeyboardInterrupt
    assert time.monotonic() - started < 60
    assert running.cancelled() and queued.cancelled()
    assert not any(w.alive() for w in pool._live)


@pytest.mark.slow
def test_sigterm_stops_an_evaluation_at_once_with_exit_143(tmp_path):
    """A cron or CI timeout sends SIGTERM: the CLI cancels its evaluations (the hanging
    candidate's worker is killed, not waited for) and exits 143."""
    import signal

    cand = tmp_path / "hang.py"
    cand.write_text(HANG)
    args = [sys.executable, "-m", "kernelwright.cli", "eval", str(TASK), str(cand)]
    shapes = ["--shape", "batch_size=4", "--shape", "dim=300", "--trials", "1"]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.Popen(
        [*args, *shapes], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    time.sleep(8.0)  # the worker is up and looping in the candidate's forward
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 30
    assert proc.returncode == 143 and "terminated" in err


def test_a_task_that_seeds_its_own_inputs_is_called_out(tmp_path, pool):
    """get_inputs that calls torch.manual_seed returns the same inputs for every trial and
    timed round: the result says so (it is the task's weakness, not the candidate's), and the
    task is not mislabelled degenerate."""
    text = TASK.read_text().replace(
        "def get_inputs():\n", "def get_inputs():\n    torch.manual_seed(0)\n"
    )
    assert "torch.manual_seed(0)" in text
    seeded = tmp_path / "seeded_gelu.py"
    seeded.write_text(text)
    result = pool.submit(seeded, GOOD, FAST).result()
    assert result.status == "ok", result.message
    assert any("same values for every seed" in n for n in result.notes), result.notes
    assert not result.correctness.degenerate_task
    plain = pool.submit(TASK, GOOD, FAST).result()
    assert not any("every seed" in n for n in plain.notes)
