"""EvalPool: warm sandboxed workers per GPU (or per core), timeouts, crash recovery and limits.

Every submitted candidate gets exactly one EvalResult, whatever it does to its worker: a hang is
killed with its whole process group and reported as `timeout`, a segfault or `os._exit` as
`crashed`, a runaway allocation as `crashed` (memory); the worker is replaced and the pool goes on.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import queue
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..config import EvalConfig
from ..crossing.isolation import rss_bytes, worker_env
from ..results import Baseline, Environment, EvalResult, Status
from ..rules import format_violations
from ..static.bounded import bounded_static_check

# How long a new worker may take to import torch and Triton and warm up (cold disk: ~30 s).
_START_TIMEOUT_S = 300.0
_POLL_S = 0.2
_LOG_TAIL_LINES = 25
# Seconds a judge may take beyond a candidate's own limit: references, float64 comparisons.
_JUDGE_GRACE_S = 60.0
# The longest a judge may wait for its GPU's gate (gpugate.py) before its watchdog gives up: the
# other judges' timed sections, each bounded by their own limits.
_GATE_WAIT_S = 3600.0


def default_devices() -> list[str]:
    """One slot per CUDA device; without CUDA, one interpreter worker per core (at most 8)."""
    try:
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:  # pragma: no cover - torch is a dependency
        n = 0
    if n:
        return [f"cuda:{i}" for i in range(n)]
    return ["cpu"] * max(1, min(os.cpu_count() or 1, 8))


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


@dataclass
class _Job:
    kind: str  # "evaluate" | "baseline"
    task: Any
    source: str
    config: EvalConfig
    future: concurrent.futures.Future


class _WorkerProcess:
    """One running worker: its process, its directory and the result pipe.

    The directory holds `home` (the candidate's working directory, its only writable place),
    `evaluator` (torch.compile's caches for the reference: no candidate access) and the log.
    """

    def __init__(self, device: str, root: Path, config: EvalConfig):
        self.device = device
        self.gpu_fraction = config.gpu_memory_fraction
        self.max_file_mb = config.max_file_mb
        self.os_sandbox = config.os_sandbox
        self.dir = Path(tempfile.mkdtemp(prefix="worker-", dir=root))
        self.home = self.dir / "home"
        self.private = self.dir / "evaluator"
        self.home.mkdir()
        self.private.mkdir()
        self.log_path = self.dir / "worker.log"
        read_fd, write_fd = os.pipe()
        env = worker_env(dict(os.environ), home=self.home, private=self.private, device=device)
        # The child must import this package the way the parent does, whatever HOME says.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        command = [
            sys.executable,
            "-m",
            "kernelwright.sandbox.judge.worker",
            "--result-fd",
            str(write_fd),
            "--device",
            device,
            "--home",
            str(self.home),
            "--private",
            str(self.private),
            "--gpu-memory-fraction",
            str(config.gpu_memory_fraction),
            "--max-file-mb",
            str(config.max_file_mb),
            *([] if config.os_sandbox else ["--no-os-sandbox"]),
        ]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                cwd=self.home,
                env=env,
                start_new_session=True,  # its own process group: killed as a whole
            )
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        self.environment: Environment | None = None

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None if none arrived within `timeout` seconds."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:  # the worker closed the pipe: it is gone
                return None
            self.buffer += chunk
            timeout = 0.05
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"type": "garbage", "text": line[:200].decode(errors="replace")}

    def send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]  # PIPE
        self.proc.stdin.flush()  # type: ignore[union-attr]  # stdin=PIPE

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker's whole process group and reap it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
            pass

    def stop(self) -> None:
        """Ask politely (EOF on stdin), then kill the group; remove the worker's directory."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]  # stdin=PIPE
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        try:
            os.close(self.fd)
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            text = self.log_path.read_bytes()[-16384:].decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-_LOG_TAIL_LINES:])


class EvalPool:
    """Warm sandboxed workers that evaluate candidates concurrently, one result per submission.

    One worker per CUDA device by default (two workers timing on one GPU disturb each other's
    numbers); on a machine without CUDA, one interpreter worker per core.
    """

    def __init__(
        self,
        workers: int | None = None,
        devices: list[str] | None = None,
        root: str | Path | None = None,
    ):
        slots = list(devices) if devices else default_devices()
        if workers is not None:
            if workers < 1:
                raise ValueError("an EvalPool needs at least one worker")
            slots = [slots[i % len(slots)] for i in range(workers)]
        self._own_root = root is None
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="kernelwright-pool-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        # Reentrant: cancel() may run in a signal handler while this thread holds it.
        self._lock = threading.RLock()
        self._closed = False
        self._cancelled = False
        self._live: set[_WorkerProcess] = set()  # started and not yet stopped
        self.environment: Environment | None = None
        self.stats = {"started": 0, "replaced": 0, "evaluated": 0}
        self._threads = [
            threading.Thread(target=self._serve, args=(device,), daemon=True, name=f"eval-{i}")
            for i, device in enumerate(slots)
        ]
        for t in self._threads:
            t.start()
        _open_pools.add(self)

    # -- public --------------------------------------------------------------------------------

    def submit(self, task, source: str, config: EvalConfig | None = None):
        """Queue one candidate; the Future's result is its EvalResult (never an exception)."""
        return self._submit("evaluate", task, source, config or EvalConfig())

    def submit_baseline(self, task, config: EvalConfig | None = None):
        """Queue a baseline measurement; the Future's result is a Baseline."""
        return self._submit("baseline", task, "", config or EvalConfig())

    def describe(self, task=None) -> Environment:
        """The environment results of this pool will carry (GPU, versions); starts a worker if
        none has started, so result caches can be looked up before anything is evaluated.

        `task` is for executors whose workers differ (a mixed Ray cluster: the environment its
        jobs go to); every worker of one pool shares one environment."""
        if self.environment is not None:
            return self.environment
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put(_Job("ping", None, "", EvalConfig(), future))
        return future.result()

    def map(self, task, sources: list[str], config: EvalConfig | None = None) -> list[EvalResult]:
        futures = [self.submit(task, s, config) for s in sources]
        return [f.result() for f in futures]

    def close(self, cancel: bool = False) -> None:
        """Finish what was submitted, then stop every worker.

        cancel=True (Ctrl-C, an error, a cron timeout) stops at once instead: queued
        evaluations and the ones running are dropped, their Futures cancelled (never a verdict:
        a killed evaluation says nothing about its candidate; a resumed run evaluates it again).
        """
        with self._lock:
            if self._closed and not cancel:
                return
            self._closed = True
        if cancel:
            self.cancel()
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join()
        _open_pools.discard(self)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def cancel(self) -> None:
        """Drop every evaluation not finished yet and kill the workers running one."""
        with self._lock:
            self._closed = self._cancelled = True
            live = list(self._live)
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.future.cancel()
        for worker in live:
            worker.kill()

    @property
    def closed(self) -> bool:
        """No more submissions: close() or cancel() ran."""
        return self._closed

    def __enter__(self) -> EvalPool:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(cancel=exc_type is not None)

    # -- internals -----------------------------------------------------------------------------

    def _submit(self, kind: str, task, source: str, config: EvalConfig):
        from ..task import Task, load_task

        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("this EvalPool is closed")
        if not isinstance(task, Task):
            task = load_task(task, config.shapes)
        self._jobs.put(_Job(kind, task, source, config, future))
        return future

    def _serve(self, device: str) -> None:
        worker: _WorkerProcess | None = None
        while True:
            job = self._jobs.get()
            if job is None:
                break
            if self._cancelled:
                job.future.cancel()
                continue
            try:
                result, worker = self._run(job, device, worker)
            except BaseException as e:  # the pool never loses a result, even to its own bugs
                if worker is not None:
                    worker.kill()
                    self._stop(worker)
                    worker = None
                result = self._failure(
                    job, "crashed", "evaluator", f"internal pool error (a kernelwright bug): {e!r}"
                )
            if self._cancelled:  # killed under it by cancel(): no verdict
                job.future.cancel()
                continue
            self.stats["evaluated"] += 1
            job.future.set_result(result)
        if worker is not None:
            self._stop(worker)

    def _stop(self, worker: _WorkerProcess) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.stop()

    def _run(self, job: _Job, device: str, worker: _WorkerProcess | None):
        config = job.config
        if job.kind == "ping":
            if worker is None or not worker.alive():
                worker, _ = self._start(device, job)
            return (worker.environment if worker else None) or Environment(), worker
        if job.kind == "evaluate":
            rejected = self._static_verdict(job)
            if rejected is not None:
                return rejected, worker
        if worker is not None and (
            not worker.alive()
            or worker.gpu_fraction != config.gpu_memory_fraction
            or worker.max_file_mb != config.max_file_mb
            or worker.os_sandbox != config.os_sandbox
        ):
            self._stop(worker)
            worker = None
        if worker is None:
            worker, failure = self._start(device, job)
            if failure is not None:
                return failure, None
        request = self._request(job)
        worker.send(request)
        result, keep = self._await(worker, job, request)
        if not keep:
            self._stop(worker)
            worker = None
            self.stats["replaced"] += 1
        return result, worker

    def _static_verdict(self, job: _Job) -> EvalResult | None:
        if job.config.unsafe_skip_static_checks:
            return None
        violations = bounded_static_check(job.source)
        if not violations:
            return None
        status: Status = "compile_error" if violations[0].rule == "syntax" else "rejected"
        return EvalResult(
            status=status,
            rule=violations[0].rule,
            message=format_violations(violations),
            **self._identity(job),
            environment=self.environment or Environment(),
        )

    def _start(self, device: str, job: _Job):
        worker = _WorkerProcess(device, self.root, job.config)
        with self._lock:
            self._live.add(worker)
            cancelled = self._cancelled
        if cancelled:  # cancel() ran while this one was being spawned
            worker.kill()
        self.stats["started"] += 1
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            message = worker.read(_POLL_S)
            if message is not None and message.get("type") == "ready":
                worker.environment = _environment(message.get("environment", {}))
                self.environment = self.environment or worker.environment
                return worker, None
            if message is None and not worker.alive():
                break
        tail = worker.log_tail()
        worker.kill()
        self._stop(worker)
        why = "did not start in time" if time.monotonic() >= deadline else "died while starting"
        return None, self._failure(
            job, "crashed", "worker-start", f"the evaluator's worker process {why}:\n{tail}"
        )

    def _request(self, job: _Job) -> dict[str, Any]:
        t = job.task
        return {
            "id": secrets.token_hex(8),
            "nonce": secrets.token_hex(16),  # replies must echo it: candidate output is not a reply
            "kind": job.kind,
            "task": {
                "path": t.path,
                "name": t.name,
                "source": t.source,
                "constants": t.constants,
                "overrides": t.overrides,
            },
            "task_hash": self._identity(job)["task_hash"],
            "source_hash": source_hash(job.source),
            "source": job.source,
            "config": job.config.to_dict(),
        }

    def _await(self, worker: _WorkerProcess, job: _Job, request: dict[str, Any]):
        """Wait for the reply, enforcing wall time per phase and the host-memory limit."""
        config = job.config
        phase = "candidate"
        # The judge enforces the candidate's own limits and replies with the verdict; this
        # watchdog is the backstop for the judge itself, with room for its own work beside them.
        backstop = config.timeout_s * 1.5 + _JUDGE_GRACE_S
        limits = {"setup": config.setup_timeout_s, "candidate": backstop, "timing": backstop}
        deadline = time.monotonic() + backstop
        paused: float | None = None  # the deadline's time left while the judge waits its turn
        memory_cap = config.host_memory_gb * 2**30
        while True:
            message = worker.read(_POLL_S)
            if message is None:
                rss = rss_bytes(worker.proc.pid)
                if rss is not None and rss > memory_cap:
                    worker.kill()
                    # The candidate runs in a process of its own with its own limit: this is
                    # the judge's memory, an evaluator error whatever the candidate did.
                    return self._failure(
                        job,
                        "crashed",
                        "evaluator",
                        f"internal evaluator error: the judge (the worker process) used "
                        f"{rss / 2**30:.1f} GB of host memory during {phase} (limit "
                        f"{config.host_memory_gb:g} GB) and was killed",
                    ), False
                if not worker.alive():
                    return self._death(worker, job, phase), False
                if time.monotonic() > deadline:
                    worker.kill()
                    return self._timeout(worker, job, phase, limits[phase]), False
                continue
            if message.get("nonce") != request["nonce"] or message.get("id") != request["id"]:
                worker.kill()
                return self._failure(
                    job,
                    "crashed",
                    "protocol",
                    "the worker's reply did not carry this request's nonce: "
                    "something other than the evaluator wrote to its result "
                    "channel",
                ), False
            if message["type"] == "phase":
                phase = message["phase"]
                deadline = time.monotonic() + limits.get(phase, config.timeout_s)
                continue
            if message["type"] == "gate":  # waiting for the GPU's gate: no one's wall time
                if message.get("waiting"):
                    paused = deadline - time.monotonic()
                    deadline = time.monotonic() + _GATE_WAIT_S
                elif paused is not None:
                    deadline, paused = time.monotonic() + paused, None
                continue
            if message["type"] == "result":
                return self._parse_result(job, message), not message.get("recycle", False)

    def _parse_result(self, job: _Job, message: dict[str, Any]):
        if job.kind == "baseline":
            if "baseline" in message:
                return Baseline.from_dict(message["baseline"])
            inner = EvalResult.from_dict(message["result"])
            return self._failure(job, "crashed", inner.rule, inner.message)
        return EvalResult.from_dict(message["result"])

    def _death(self, worker: _WorkerProcess, job: _Job, phase: str):
        code = worker.proc.wait()
        tail = worker.log_tail()
        during = _phase_text(phase)
        if code < 0:
            sig = signal.Signals(-code)
            if sig == signal.SIGXCPU:
                return self._failure(
                    job,
                    "timeout",
                    "cpu-time",
                    f"CPU time limit ({job.config.cpu_time_s:g} s) exceeded {during}\n{tail}",
                )
            return self._failure(
                job,
                "crashed",
                "signal",
                f"the worker died of {sig.name} {during} (a segfault or abort in "
                f"native code); the evaluation goes on in a fresh worker.\n{tail}",
            )
        return self._failure(
            job,
            "crashed",
            "exit",
            f"the worker process exited with code {code} {during} without a "
            "result (exit()/os._exit in candidate code?); exiting proves "
            f"nothing, results come from the evaluator.\n{tail}",
        )

    def _timeout(self, worker: _WorkerProcess, job: _Job, phase: str, limit: float):
        rule = "setup" if phase == "setup" else "wall-time"
        what = (
            "the task's setup (reference, variant shapes, torch.compile)"
            if phase == "setup"
            else "the candidate"
        )
        return self._failure(
            job,
            "timeout",
            rule,
            f"{what} ran past the {limit:g} s wall-clock limit {_phase_text(phase)}"
            f"; its process group was killed.\n{worker.log_tail()}",
        )

    def _identity(self, job: _Job) -> dict[str, Any]:
        return job_identity(job.task, job.config)

    def _failure(self, job: _Job, status: Status, rule: str | None, message: str):
        env = self.environment or Environment()
        return failure_result(
            job.kind, job.task, job.source, job.config, status, rule, message, env
        )


def job_identity(task, config: EvalConfig) -> dict[str, Any]:
    """The identity fields every result of `task` under `config` carries (None: a ping)."""
    if task is None:
        return {"task": "", "task_hash": "", "dtype": config.dtype, "shape_overrides": {}}
    effective = dataclasses.replace(task, overrides={**task.overrides, **config.shapes})
    return {
        "task": task.name,
        "task_hash": effective.hash,
        "dtype": config.dtype,
        "shape_overrides": dict(effective.overrides),
    }


def failure_result(
    kind: str,
    task,
    source: str,
    config: EvalConfig,
    status: Status,
    rule: str | None,
    message: str,
    env: Environment,
) -> EvalResult | Baseline:
    """The result of a job the evaluator could not finish: an EvalResult for "evaluate", a
    Baseline for "baseline" (the pool's and a cluster executor's, one form)."""
    identity = job_identity(task, config)
    if kind == "baseline":
        identity.pop("shape_overrides")
        return Baseline(
            status=status if status in ("timeout", "crashed") else "error",
            message=message,
            environment=env,
            task=identity["task"],
            task_hash=identity["task_hash"],
            dtype=identity["dtype"],
        )
    return EvalResult(
        status=status,
        rule=rule,
        message=message,
        source_hash=source_hash(source),
        environment=env,
        **identity,
    )


def _phase_text(phase: str) -> str:
    return {
        "setup": "while setting up the task",
        "candidate": "while running the candidate",
        "timing": "while timing the candidate",
    }.get(phase, f"during {phase}")


def _environment(data: dict[str, Any]) -> Environment:
    known = {f.name for f in dataclasses.fields(Environment)}
    data = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known}
    return Environment(**data)


class _Cancellable(Protocol):
    def cancel(self) -> None: ...


# Pools not closed yet, for cancel_open_pools() (a suite's Ctrl-C reaches the main thread only):
# EvalPools, and the evaluators of other executors (cluster/) through track_open_pool.
_open_pools: weakref.WeakSet[_Cancellable] = weakref.WeakSet()


def track_open_pool(pool: _Cancellable) -> None:
    """Have cancel_open_pools() cancel `pool` too, until untrack_open_pool (or its collection)."""
    _open_pools.add(pool)


def untrack_open_pool(pool: _Cancellable) -> None:
    _open_pools.discard(pool)


def cancel_open_pools() -> None:
    """cancel() every open pool of this process: for a KeyboardInterrupt caught in the main
    thread while other threads run evaluations."""
    for pool in list(_open_pools):
        pool.cancel()
