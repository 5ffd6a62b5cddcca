"""sandbox/judge/gpugate.py: judges of one GPU time one at a time, check side by side, and a waiting
timer is not starved; a candidate's process is stopped while its judge does not hold the gate."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from kernelwright.sandbox.judge.gpugate import GpuGate, freeze
from kernelwright.sandbox.results import EvalResult

CUDA = torch.cuda.is_available()


def _holder(directory: str, mode: str, hold_s: float, log: str, name: str, start) -> None:
    start.wait()
    gate = GpuGate("test-gpu", Path(directory))
    with gate.hold(mode):
        with open(log, "a") as f:
            f.write(f"{name} in {time.monotonic():.4f}\n")
        time.sleep(hold_s)
        with open(log, "a") as f:
            f.write(f"{name} out {time.monotonic():.4f}\n")


def _events(log: Path) -> list[tuple[str, str, float]]:
    rows = [line.split() for line in log.read_text().splitlines()]
    return sorted(((n, what, float(t)) for n, what, t in rows), key=lambda r: r[2])


def _spans(events) -> dict[str, tuple[float, float]]:
    spans: dict[str, list[float]] = {}
    for name, _, t in events:
        spans.setdefault(name, []).append(t)
    return {n: (ts[0], ts[-1]) for n, ts in spans.items()}


def _run(tmp_path: Path, plan: list[tuple[str, str, float, float]]) -> dict:
    """plan: (name, mode, start delay s, hold s); returns each holder's (in, out) times."""
    ctx = mp.get_context("fork")
    log = tmp_path / "log"
    procs = []
    for name, mode, delay, hold in plan:
        go = ctx.Event()
        p = ctx.Process(target=_holder, args=(str(tmp_path), mode, hold, str(log), name, go))
        p.start()
        procs.append((p, go, delay))
    t0 = time.monotonic()
    for _p, go, delay in sorted(procs, key=lambda x: x[2]):
        time.sleep(max(0.0, t0 + delay - time.monotonic()))
        go.set()
    for p, _, _ in procs:
        p.join(30)
        assert p.exitcode == 0
    return _spans(_events(log))


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_checks_overlap_and_a_timed_section_runs_alone(tmp_path):
    spans = _run(
        tmp_path,
        [
            ("check1", "shared", 0.0, 0.6),
            ("check2", "shared", 0.1, 0.6),
            ("timer", "exclusive", 0.2, 0.3),
        ],
    )
    assert _overlap(spans["check1"], spans["check2"])  # checks side by side
    for check in ("check1", "check2"):
        assert not _overlap(spans["timer"], spans[check]), spans  # the timed section alone


def test_a_waiting_timer_is_not_starved_by_later_checks(tmp_path):
    spans = _run(
        tmp_path,
        [
            ("check1", "shared", 0.0, 0.5),
            ("timer", "exclusive", 0.1, 0.2),
            ("check2", "shared", 0.25, 0.5),  # asks while the timer waits: goes after it
        ],
    )
    assert spans["timer"][0] >= spans["check1"][1]
    assert spans["check2"][0] >= spans["timer"][1], spans


def _yielding_checker(directory: str, hold_s: float, log: str, start) -> None:
    """A shared holder that looks for a waiting timer every 10 ms (as a judge does while its
    candidate compiles) and lets it in; logs when it was stopped and continued."""
    start.wait()
    gate = GpuGate("test-gpu", Path(directory))

    def note(what: str) -> None:
        with open(log, "a") as f:
            f.write(f"checker {what} {time.monotonic():.4f}\n")

    with gate.hold("shared", before_release=lambda: note("stop"), after_acquire=lambda: note("go")):
        ends = time.monotonic() + hold_s
        while time.monotonic() < ends:
            ends += gate.yield_turn(
                before_release=lambda: note("stop"), after_acquire=lambda: note("go")
            )
            time.sleep(0.01)


def test_a_checker_that_yields_lets_a_waiting_timer_in_before_its_check_ends(tmp_path):
    ctx = mp.get_context("fork")
    log = tmp_path / "log"
    go1, go2 = ctx.Event(), ctx.Event()
    checker = ctx.Process(target=_yielding_checker, args=(str(tmp_path), 1.5, str(log), go1))
    timer = ctx.Process(
        target=_holder, args=(str(tmp_path), "exclusive", 0.3, str(log), "timer", go2)
    )
    checker.start()
    timer.start()
    go1.set()
    time.sleep(0.2)
    go2.set()
    for p in (checker, timer):
        p.join(30)
        assert p.exitcode == 0
    events = _events(log)
    checker_times = [(what, t) for n, what, t in events if n == "checker"]
    t_in = next(t for n, what, t in events if n == "timer" and what == "in")
    t_out = next(t for n, what, t in events if n == "timer" and what == "out")
    # The timer got in while the check still had more than a second to go ...
    assert t_in < checker_times[0][1] + 0.8, events
    # ... with the checker stopped from before the timer went in until after it came out.
    stop = max(t for what, t in checker_times if what == "stop" and t <= t_in)
    go = min(t for what, t in checker_times if what == "go" and t >= t_out)
    assert not [t for what, t in checker_times if what == "go" and stop < t < t_out], events
    assert stop <= t_in and go >= t_out
    # The check's own time was kept whole: it ended its 1.5 s plus the timer's 0.3 s.
    assert checker_times[-1][1] - checker_times[0][1] >= 1.5 + 0.3 - 0.05


def test_yield_turn_without_a_waiting_timer_keeps_the_hold(tmp_path):
    gate = GpuGate("test-gpu", tmp_path)
    calls: list[str] = []
    assert gate.yield_turn() == 0.0  # not held: nothing to yield
    with gate.hold("shared"):
        assert not gate.waiter()
        assert gate.yield_turn(before_release=lambda: calls.append("stop")) == 0.0
        assert gate.held == "shared" and calls == []
    with gate.hold("exclusive"):
        assert not gate.waiter() and gate.yield_turn() == 0.0 and gate.held == "exclusive"


def test_an_exclusive_block_inside_a_shared_one_trades_it_and_takes_it_back(tmp_path):
    gate = GpuGate("test-gpu", tmp_path)
    calls: list[str] = []
    with gate.hold(
        "shared",
        before_release=lambda: calls.append("stop"),
        after_acquire=lambda: calls.append("go"),
    ):
        assert gate.held == "shared"
        with gate.hold(
            "exclusive",
            before_release=lambda: calls.append("stop"),
            after_acquire=lambda: calls.append("go"),
        ):
            assert gate.held == "exclusive"
            # Another process cannot take even a shared hold now.
            probe = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
                    "try:\n fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB); print('got')\n"
                    "except BlockingIOError: print('blocked')",
                    str(tmp_path / "kernelwright-gpu-test-gpu.lock"),
                ],
                capture_output=True,
                text=True,
            )
            assert probe.stdout.strip() == "blocked"
        assert gate.held == "shared"
    assert gate.held is None
    # Continued under the shared hold; stopped before it went, continued under the exclusive
    # one; stopped before that went, continued under the shared one again; stopped at the end.
    assert calls == ["go", "stop", "go", "stop", "go", "stop"]


def test_without_a_key_the_gate_is_a_no_op(tmp_path):
    gate = GpuGate(None, tmp_path)
    assert not gate.active
    with gate.hold("exclusive"):
        pass
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError), GpuGate("k", tmp_path).hold("sometimes"):
        pass


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_freeze_stops_a_process_tree_and_thaw_continues_it():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(p.pid, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        grandchild = int(child.stdout.readline())
        both = [child.pid, grandchild]
        freeze(lambda: both, True)
        time.sleep(0.2)
        assert [_state(p) for p in both] == ["T", "T"]
        freeze(lambda: both, False)
        time.sleep(0.2)
        assert all(_state(p) in ("S", "R") for p in both)
    finally:
        for pid in (child.pid,):
            os.kill(pid, 9)
        child.wait()


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="two judges on one GPU")
def test_two_judges_on_one_gpu_time_alone():
    """Two workers judging at once on one GPU: both verdicts ok, each time within 5% of a
    judge alone (their timed sections never overlap the other's checks)."""
    from test_zoo import AFFINE, HONEST_AFFINE

    from kernelwright.sandbox import EvalConfig, EvalPool

    config = EvalConfig(compile_baseline=False)
    with EvalPool(workers=1) as pool:
        alone = [pool.submit(AFFINE, HONEST_AFFINE, config).result() for _ in range(2)]
    with EvalPool(workers=2) as pool:
        futures = [pool.submit(AFFINE, HONEST_AFFINE, config) for _ in range(6)]
        side = [f.result() for f in futures]
    assert all(r.status == "ok" for r in alone + side), [r.summary() for r in alone + side]
    solo = min(r.timings.candidate.median_ms for r in alone)
    for r in side:
        assert r.timings.candidate.median_ms <= solo * 1.05 + 0.005, (solo, r.summary())


class _ScriptedWorker:
    """What the pool's watchdog reads from a judge: a gate wait longer than the candidate's
    whole limit, then its verdict."""

    def __init__(self, request, wait_s: float):
        self.request, self.wait_s = request, wait_s
        self.t0 = time.monotonic()
        self.sent: list[str] = []
        self.proc = types.SimpleNamespace(pid=os.getpid())
        self.killed = False

    def _message(self, **fields):
        return {"id": self.request["id"], "nonce": self.request["nonce"], **fields}

    def read(self, timeout: float):
        elapsed = time.monotonic() - self.t0
        if "wait" not in self.sent:
            self.sent.append("wait")
            return self._message(type="gate", waiting=True)
        if elapsed < self.wait_s:
            time.sleep(min(timeout, 0.05))
            return None
        if "go" not in self.sent:
            self.sent.append("go")
            return self._message(type="gate", waiting=False)
        result = EvalResult(status="ok", task="t").to_dict()
        return self._message(type="result", result=result)

    def alive(self) -> bool:
        return True

    def kill(self) -> None:
        self.killed = True

    def log_tail(self) -> str:
        return ""


def test_the_pools_watchdog_does_not_count_a_judges_wait_for_the_gate(monkeypatch):
    from kernelwright.sandbox import EvalConfig
    from kernelwright.sandbox.judge import pool as pool_module
    from kernelwright.sandbox.judge.pool import EvalPool, _Job

    monkeypatch.setattr(pool_module, "_JUDGE_GRACE_S", 0.0)
    config = EvalConfig(timeout_s=0.2)  # a backstop of 0.3 s
    pool = EvalPool.__new__(EvalPool)
    pool.environment = None
    job = _Job("evaluate", None, "", config, None)
    request = {"id": 1, "nonce": "n"}
    worker = _ScriptedWorker(request, wait_s=1.0)
    result, _ = pool._await(worker, job, request)
    assert result.status == "ok" and not worker.killed, result.summary()


_BUSY = """
import sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
for _ in range(3):
    x @ x
torch.cuda.synchronize()
print("busy", flush=True)
ends = time.monotonic() + float(sys.argv[1])
while time.monotonic() < ends:  # keep a queue of matmuls in front of the device
    for _ in range(20):
        x @ x
    torch.cuda.synchronize()
print("done", time.monotonic(), flush=True)
"""


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="another process's work on the GPU")
def test_an_exclusive_hold_begins_once_another_processs_work_has_ended():
    from kernelwright.sandbox.judge.worker import Worker

    judge = types.SimpleNamespace(
        torch=torch,
        device=torch.device("cuda", 0),
        _probe=None,
        busy_s=0.0,
        never_quiet=0,
        busy_streak=0,
    )
    Worker.settle_device(judge)  # a quiet device: at once
    assert judge.busy_s < 0.05 and judge.never_quiet == 0, judge
    busy = subprocess.Popen([sys.executable, "-c", _BUSY, "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline().strip() == "busy"
        Worker.settle_device(judge)
        settled = time.monotonic()
        done = busy.stdout.readline().split()
        assert done[0] == "done"
        # Not before the other process's last matmuls ended (its synchronize, then the print).
        assert settled >= float(done[1]) - 0.05, (settled, done)
        assert judge.busy_s >= 1.0 and judge.never_quiet == 0, judge
    finally:
        busy.kill()
        busy.wait()


def test_a_judge_that_lets_go_of_the_gate_pauses_its_nvml_sampler():
    """The sampler's driver calls stop with the candidate's process whenever the judge lets go
    of the gate (another judge may be timing), and go on when it holds the gate again."""
    import threading
    from types import SimpleNamespace

    from kernelwright.sandbox.judge.evaluation import Evaluation

    ev = SimpleNamespace(proc=None, sampler=SimpleNamespace(paused=threading.Event()))
    ev.sampler_pause = lambda paused: Evaluation.sampler_pause(ev, paused)
    Evaluation.freeze(ev)  # before_release
    assert ev.sampler.paused.is_set()
    Evaluation.freeze(ev, stop=False)  # after_acquire (thaw)
    assert not ev.sampler.paused.is_set()
