"""A suite: many tasks through the optimizer (concurrently with jobs), resumable from a state
file (suite_state.json), each task's row for KernelBench's metrics, and the suite's report.

The optimizer is passed in (`optimize`: graph.optimize from `kernelwright suite`, a scripted one
in tests), and so is how a task's run shows its progress (`progress`).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..cluster import Evaluator, open_evaluator
from ..decisions import fastest
from ..report.suite import suite_row, write_suite_report
from ..run.config import RunConfig
from ..run.rundir import RunDir, run_candidates
from ..sandbox.judge.pool import cancel_open_pools
from ..sandbox.results import Environment
from ..sandbox.task import TaskError, load_task
from ..store import Store
from .tasks import Optimize, Progress, matches, task_label

STATE_NAME = "suite_state.json"
# Config fields that do not change what a run finds: where things go and how many processes.
NOT_IN_KEY = frozenset(
    {
        "out_dir",
        "db",
        "workers",
        "devices",
        "executor",
        "ray_address",
        "max_retries",
        "no_cache",
        "chat",
        "fallback_offline",
    }
)


def suite_key(task_hash: str, config: RunConfig) -> str:
    """What makes a task finished: the same task (text and sizes) under the same search config."""
    knobs = {k: v for k, v in config.to_dict().items() if k not in NOT_IN_KEY}
    text = task_hash + json.dumps(knobs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# -- the state file -------------------------------------------------------------------------------
class SuiteState:
    """suite_state.json: per suite key, the run handling the task and, once done, its row.

    Entries are merged into what is on disk at every write, so two suites sharing a directory
    keep each other's entries; the file is replaced atomically, so a kill never leaves half.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._read().get(key)

    def put(self, key: str, entry: dict[str, Any]) -> None:
        with self._lock:
            data = self._read()
            data[key] = entry
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, self.path)


# -- one task -------------------------------------------------------------------------------------
def task_row(label: str, run_dir: Path, run: dict[str, Any]) -> dict[str, Any]:
    """The task's suite row: its fastest verified candidate (KernelBench counts a correct kernel
    even when it is slower), else its last verdict, else why nothing was evaluated.

    Only the candidates' own verdicts count as theirs (EvalResult.fault): an evaluator error
    (kernelwright's fault) is counted in `evaluator_errors`, apart from the candidates' failures,
    and a task whose reference fails is a `task-error` row, not "no candidate".
    """
    cands = run_candidates(run_dir)
    faults = [c.result.fault for c in cands]
    judged = [c for c in cands if c.result.fault == "candidate"]
    verified = [c for c in judged if c.result.ok]
    pick = fastest(verified, lambda c: c.result.speedup_eager) or (judged[-1] if judged else None)
    internal = [c for c in cands if c.result.fault == "evaluator"]
    if run.get("stop_reason") == "task-error" or "task" in faults:
        row = {"task": label, "status": "task-error", "correct": False}
        task_failure = next((c.result.message for c in cands if c.result.fault == "task"), "")
        row["note"] = run.get("stop_detail") or task_failure
    elif pick is None and internal:
        row = {"task": label, "status": "evaluator-error", "correct": False}
        row["note"] = internal[-1].result.message
    elif pick is None:
        row = {"task": label, "status": run.get("stop_reason") or "no-candidate", "correct": False}
        row["note"] = run.get("stop_detail")  # e.g. "no offline candidate: nothing to fuse..."
    else:
        row = suite_row(label, pick.result)
        row["candidate"] = pick.key
        row["tuned"] = pick.tuned
        if pick.result.ok:
            row["kernel"] = pick.source
            if pick.result.notes:  # e.g. an ill-conditioned output judged against float64
                row["note"] = pick.result.notes[0]
        else:
            row["note"] = pick.result.message
    row["evaluator_errors"] = len(internal)
    row["run_id"] = run.get("run_id")
    # Where its candidates ran on a cluster (the suite report's GPUs table).
    row["ran_on"] = sorted({ran_on(c.result.environment) for c in cands} - {""})
    return row


def ran_on(env: Environment) -> str:
    """'node GPU 3' for a result from a cluster's actor; "" from the local pool."""
    if not env.node:
        return ""
    return f"{env.node} GPU {env.gpu_index}" if env.gpu_index else f"{env.node} (cpu)"


@dataclass
class TaskOutcome:
    label: str
    path: str
    row: dict[str, Any]
    run_id: str | None = None
    skipped: bool = False  # finished by an earlier invocation
    error: str = ""
    not_started: bool = False  # past the suite's stop_at: left for a later invocation
    run: dict[str, Any] = field(default_factory=dict)  # run.json of this invocation's run


@dataclass
class SuiteRunner:
    """Runs a suite's tasks through `optimize`, one run directory each, under config.out_dir."""

    optimize: Optimize
    config: RunConfig
    out: IO[str]
    store: Store | None = None
    # With several jobs on a GPU machine: one group of GPUs per job (see device_groups), lent
    # to a task for its whole run, so two tasks never time on the same GPU.
    device_groups: list[tuple[str, ...]] | None = None
    # time.monotonic() after which no task starts (running ones finish): `suite --stop-after`.
    stop_at: float | None = None
    # Label patterns (fnmatch) of tasks run again though an earlier invocation finished them
    # (`suite --redo`): a re-measurement after an upgrade or a fix; their rows are replaced.
    redo: tuple[str, ...] = ()
    # How a task's run shows its progress (a listener per task, its lines prefixed with the
    # task's label); None: the runs show none, only the suite's own lines go to `out`.
    progress: Progress | None = None
    state: SuiteState = field(init=False)
    _free: queue.Queue[tuple[str, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self.state = SuiteState(Path(self.config.out_dir) / STATE_NAME)
        self._free = queue.Queue()
        for group in self.device_groups or []:
            self._free.put(group)
        # One evaluator per job, kept warm from task to task (a worker start is seconds);
        # None: each run opens its own (several jobs on CPU cores). On a Ray cluster one
        # evaluator serves every job: its actors take the next job of any task.
        self._pools: dict[tuple[str, ...], Evaluator] | None = None
        self._pools_lock = threading.Lock()

    def run_task(self, path: Path) -> TaskOutcome:
        if not self.device_groups:
            return self._not_started(path) or self._run_task(path, self.config, ())
        group = self._free.get()  # may wait for another job's task to end: check the time after
        try:
            return self._not_started(path) or self._run_task(
                path, self.config.replace(devices=group), group
            )
        finally:
            self._free.put(group)

    def _pool(self, group: tuple[str, ...]) -> Evaluator | None:
        if self._pools is None:
            return None
        with self._pools_lock:
            if self.config.executor == "ray":
                group = ()
            if group not in self._pools:
                self._pools[group] = open_evaluator(self.config, list(group) or None)
            return self._pools[group]

    def _not_started(self, path: Path) -> TaskOutcome | None:
        if self.stop_at is None or time.monotonic() < self.stop_at:
            return None
        row = {"task": task_label(path), "status": "not-started", "correct": False}
        return TaskOutcome(task_label(path), str(path), row, not_started=True)

    def _run_task(self, path: Path, config: RunConfig, group: tuple[str, ...]) -> TaskOutcome:
        label = task_label(path)
        try:
            task = load_task(path, config.shapes)
        except TaskError as e:
            return self._failed(label, path, str(e))
        key = suite_key(task.hash, config)
        entry = self.state.get(key) or {}
        if entry.get("finished"):
            earlier = entry.get("run_id")
            if not self.redoes(label):
                self.out.write(f"[{label}] finished earlier in run {earlier}: skipped\n")
                return TaskOutcome(label, str(path), entry["row"], earlier, skipped=True)
            self.out.write(f"[{label}] finished earlier in run {earlier}: run again (--redo)\n")
            entry = {}  # a new run; the earlier one stays on disk
        resume = entry.get("run_id")
        if resume and not RunDir.at(config.out_dir, resume).exists():
            resume = None

        def started(event: dict[str, Any]) -> None:
            if event.get("event") == "run.start":
                self.state.put(key, {"task": label, "path": str(path), "run_id": event["run_id"]})

        shown = [self.progress(f"[{label}] ")] if self.progress is not None else []
        listeners = [started, *shown]
        shared = {"pool": pool} if (pool := self._pool(group)) is not None else {}
        # The task as parsed above (not read again); the run syncs itself into the suite's store.
        try:
            run = self.optimize(
                config,
                None if resume else str(path),
                task=task,
                store=self.store,
                resume=resume,
                listeners=listeners,
                **shared,
            )
        except BrokenPipeError:  # the reader of our output left (`| head`): stop, resumable
            raise
        except Exception as e:  # one task's failure (a bug, a broken task) must not end the suite
            return self._failed(label, path, f"{type(e).__name__}: {e}")
        run_dir = Path(config.out_dir) / run["run_id"]
        row = task_row(label, run_dir, run)
        # A run whose model answered nothing is not the task done as asked: a rerun (after the
        # endpoint is fixed) searches it again from scratch, unless --fallback-offline took it.
        redo = bool(run.get("llm_unanswered")) and not config.fallback_offline
        entry = {"task": label, "path": str(path), "run_id": run["run_id"], "row": row}
        entry |= {"run_id": None, "finished": False} if redo else {"finished": True}
        self.state.put(key, entry)
        return TaskOutcome(label, str(path), row, run["run_id"], run=run)

    def redoes(self, label: str) -> bool:
        return matches(label, self.redo)

    def _failed(self, label: str, path: Path, message: str) -> TaskOutcome:
        self.out.write(f"[{label}] error: {message}\n")
        row = {"task": label, "status": "error", "correct": False, "rule": None}
        return TaskOutcome(label, str(path), row, error=message)

    def run(self, paths: Sequence[Path], jobs: int = 1) -> list[TaskOutcome]:
        """Every task (jobs at a time); outcomes in the order of `paths`.

        One job runs in the calling thread, so Ctrl-C unwinds through the task's run and its
        evaluator at once. With several, Ctrl-C reaches only this thread: it cancels every open
        evaluator pool (the running tasks then end, resumable) before waiting for them.
        """
        if self.device_groups:
            jobs = min(jobs, len(self.device_groups))
        ray = self.config.executor == "ray"
        self._pools = {} if jobs <= 1 or self.device_groups or ray else None
        failed = True
        try:
            if ray:  # started before the first task: a cluster that cannot start stops here
                self._pool(())
            outcomes = self._run_all(paths, jobs)
            failed = False
            return outcomes
        finally:
            for pool in (self._pools or {}).values():
                pool.close(cancel=failed)
            self._pools = None

    def _run_all(self, paths: Sequence[Path], jobs: int) -> list[TaskOutcome]:
        if jobs <= 1:
            return [self.run_task(p) for p in paths]
        executor = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="suite")
        try:
            futures = [executor.submit(self.run_task, p) for p in paths]
            # Wait in short slices: a signal's handler runs only when this thread runs Python,
            # and a plain result() could block it until every task is done.
            while wait(futures, timeout=0.5).not_done:
                pass
            return [f.result() for f in futures]
        except BaseException:
            cancel_open_pools()
            executor.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            executor.shutdown(wait=True)


def device_groups(gpus: int, jobs: int) -> list[tuple[str, ...]]:
    """The GPUs of each job: `gpus` dealt round-robin into min(jobs, gpus) groups. Two jobs
    never share a GPU (their timings would disturb each other), so jobs beyond the GPU count
    are not made; a job with several GPUs evaluates a task's candidates on all of them."""
    n = max(1, min(jobs, gpus))
    return [tuple(f"cuda:{i}" for i in range(gpus) if i % n == k) for k in range(n)]


def workers_per_job(config: RunConfig, jobs: int, cuda: bool) -> RunConfig:
    """Without CUDA each job's evaluator gets its share of the cores (the interpreter is CPU
    bound: more workers than cores only adds switching). On a GPU the pools keep their default."""
    if config.workers is not None or cuda or jobs <= 1:
        return config
    return config.replace(workers=max(1, (os.cpu_count() or 1) // jobs))


def plan_jobs(
    config: RunConfig, jobs: int, cuda: bool
) -> tuple[RunConfig, list[tuple[str, ...]] | None]:
    """The config a suite's jobs run under and, with several jobs on a GPU machine, each job's
    GPUs (device_groups: fewer groups than jobs where there are fewer GPUs). A Ray cluster's
    actors are one per GPU or core, whatever the jobs: its config stays, no groups are made."""
    if config.executor == "ray":
        return config, None
    config = workers_per_job(config, jobs, cuda)
    if jobs <= 1 or not cuda:
        return config, None
    import torch

    return config, device_groups(torch.cuda.device_count(), jobs)


def write_reports(outcomes: Sequence[TaskOutcome], out_dir: Path) -> dict[str, Path]:
    """write_suite_report for these tasks: suite.md/.json/.html and the speedup plot."""
    title = f"kernelwright suite: {len(outcomes)} task{'s' * (len(outcomes) != 1)}"
    return write_suite_report([o.row for o in outcomes], out_dir, title=title)
