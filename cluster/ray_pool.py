"""RayPool: the evaluator spread over a Ray cluster, one actor per GPU, EvalPool's interface.

Each actor hosts kernelwright's own evaluator (an EvalPool of one judge) on its GPU, or on one
core of a CPU-only cluster (the Triton interpreter), so there is still one timing worker per GPU.
The driver keeps the graph, the store and the run directories; jobs travel as the Task (its
source and sizes: the remote node needs no task file) and the candidate's text, and come back as
the same EvalResult or Baseline, stamped with the node and GPU they ran on.

Scheduling is Ray's placement of the actors plus one rule: the next job goes to an idle actor.
Every job of one task goes to actors of one environment group (GPU model and software versions,
`Environment.key`), so on a mixed cluster a task's candidates, sweeps and baseline are measured
on one kind of GPU; a speedup is always a ratio of times measured by one judge on one GPU.

When an actor (or its node) dies mid-job, the job goes back to the front of its group's queue,
for the next idle actor, and a replacement actor is started; after `max_retries` such losses the
job's result is `crashed` (rule "executor", the evaluator's fault, never the candidate's). A job
whose result arrived is never sent again. cancel() (Ctrl-C, SIGTERM) drops queued jobs, kills the
judges under the running ones and the actors; close() shuts down a Ray it started itself, never
one the user connected to.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import socket
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError

from ..sandbox.config import EvalConfig
from ..sandbox.judge.pool import EvalPool, failure_result, track_open_pool, untrack_open_pool
from ..sandbox.results import Baseline, Environment, EvalResult
from ..sandbox.task import Task, load_task
from . import ExecutorError

# An actor's start imports torch and Triton twice (actor, judge) and warms the judge: ~5 s warm,
# a cold disk or a remote node pulling its environment can take minutes.
_START_TIMEOUT_S = 600.0
_POLL_S = 0.2
# How long cancel() waits for the actors to kill their judges before it kills the actors.
_CANCEL_WAIT_S = 3.0
# An actor that cannot be started again (its node gone, no free GPU) is retried this often
# before its slot gives up; the other slots go on.
_RESTART_ATTEMPTS = 3
# How long the Ray head's port may take to accept a connection before the address is refused.
_REACH_TIMEOUT_S = 5.0


class EvalActor:
    """One GPU (or core) of the cluster: a warm EvalPool of one judge on it."""

    def __init__(self, cpu: bool) -> None:
        # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU, so it is cuda:0 in here; the judge's
        # environment (sandbox.crossing.isolation.worker_env) maps that index through the same
        # variable.
        self.pool = EvalPool(workers=1, devices=["cpu" if cpu else "cuda:0"])
        gpus = [] if cpu else ray.get_gpu_ids()
        self.place: dict[str, Any] = {
            "node": socket.gethostname(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "gpu_index": ",".join(str(g) for g in gpus),
            "pid": os.getpid(),
        }

    def _stamp(self, env: Environment) -> Environment:
        return dataclasses.replace(env, node=self.place["node"], gpu_index=self.place["gpu_index"])

    def describe(self) -> tuple[Environment, dict[str, Any]]:
        return self._stamp(self.pool.describe()), self.place

    def run(self, kind: str, task: Task, source: str, config: EvalConfig) -> EvalResult | Baseline:
        if kind == "baseline":
            future = self.pool.submit_baseline(task, config)
        else:
            future = self.pool.submit(task, source, config)
        result = future.result()
        return dataclasses.replace(result, environment=self._stamp(result.environment))

    def cancel(self) -> None:
        self.pool.cancel()

    def close(self) -> None:
        self.pool.close()


@dataclass
class _Job:
    kind: str  # "evaluate" | "baseline"
    task: Task
    source: str
    config: EvalConfig
    future: Future
    group: str
    losses: int = 0  # actors that died under this job
    lost_on: list[str] = field(default_factory=list)


@dataclass(eq=False)  # identity: a set of live slots
class _Slot:
    """One actor and what it reported about itself."""

    actor: Any
    environment: Environment
    place: dict[str, Any]
    job: _Job | None = None  # the job it is running now

    @property
    def group(self) -> str:
        return self.environment.key

    @property
    def where(self) -> str:
        gpu = f" GPU {self.place['gpu_index']}" if self.place.get("gpu_index") else ""
        return f"{self.place.get('node', '?')}{gpu}"


class RayPool:
    """Evaluates candidates on the actors of a Ray cluster; EvalPool's interface (Evaluator)."""

    def __init__(
        self,
        address: str | None = None,
        *,
        max_retries: int = 2,
        actors: int | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        self.max_retries = max_retries
        self._owns_ray = False
        if not ray.is_initialized():
            # No address and no RAY_ADDRESS: ray.init starts a Ray on this machine, ours to stop.
            self._owns_ray = not (address or os.environ.get("RAY_ADDRESS"))
            _check_reachable(address or os.environ.get("RAY_ADDRESS") or "")
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = address or os.environ.get("RAY_ADDRESS") or "a local Ray"
                raise ExecutorError(
                    f"cannot start or reach Ray at {where}: {_first_line(e)}"
                ) from None
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        self.cpu = gpus == 0
        count = gpus or int(resources.get("CPU", 1))
        count = max(1, min(count, actors or count))
        options: dict[str, Any] = {"max_restarts": 0, "max_concurrency": 2}
        options |= {"num_cpus": 1} if self.cpu else {"num_gpus": 1}
        self._actor_class: Any = ray.remote(EvalActor).options(**options)
        self._lock = threading.Condition(threading.RLock())
        self._queues: dict[str, collections.deque[_Job]] = {}
        self._pins: dict[str, str] = {}  # task hash -> environment group
        self._slots: set[_Slot] = set()
        self._unfinished = 0  # submitted jobs without a result yet
        self._closed = self._cancelled = False
        self.stats = {"started": 0, "replaced": 0, "evaluated": 0, "retried": 0}
        self.notes: list[str] = []
        self._threads: list[threading.Thread] = []  # none yet: actors starting in __init__
        slots = self._start_actors(count)
        if not slots:
            self._shutdown_ray()
            raise ExecutorError(
                "no Ray actor of kernelwright's evaluator could start: "
                + ("; ".join(self.notes) or "no resources")
            )
        self._threads = [
            threading.Thread(target=self._serve, args=(s,), daemon=True, name=f"ray-eval-{i}")
            for i, s in enumerate(slots)
        ]
        for t in self._threads:
            t.start()
        track_open_pool(self)

    # -- public --------------------------------------------------------------------------------

    def submit(self, task: Any, source: str, config: EvalConfig | None = None) -> Future:
        """Queue one candidate; the Future's result is its EvalResult (never an exception)."""
        return self._submit("evaluate", task, source, config or EvalConfig())

    def submit_baseline(self, task: Any, config: EvalConfig | None = None) -> Future:
        return self._submit("baseline", task, "", config or EvalConfig())

    def map(self, task: Any, sources: list[str], config: EvalConfig | None = None):
        futures = [self.submit(task, s, config) for s in sources]
        return [f.result() for f in futures]

    def describe(self, task: Any = None) -> Environment:
        """The environment the jobs of `task` go to (without one: the first group's)."""
        loaded = None if task is None else self._task(task, EvalConfig())
        with self._lock:
            if not self._slots:
                raise RuntimeError("this RayPool has no live actor")
            group = min(self._groups()) if loaded is None else self._group_for(loaded)
            return next(s.environment for s in self._slots if s.group == group)

    def placements(self) -> list[dict[str, Any]]:
        """Each live actor: node, node id, GPU index, pid, environment key, and whether it is
        running a job now."""
        with self._lock:
            return [
                {**s.place, "environment": s.group, "busy": s.job is not None} for s in self._slots
            ]

    def close(self, cancel: bool = False) -> None:
        """Finish what was submitted (or, cancel=True, drop it), stop the actors, and shut down
        the Ray this pool started (never one it connected to)."""
        with self._lock:
            already = self._closed and not self._threads
            self._closed = True
            self._lock.notify_all()
        if cancel:
            self.cancel()
        if already:
            return
        for t in self._threads:
            t.join()
        self._threads = []
        with self._lock:
            slots = list(self._slots)
            self._slots.clear()
        if slots and not self._cancelled:
            try:  # the judges stop and remove their directories
                ray.get([s.actor.close.remote() for s in slots], timeout=30)
            except RayError:
                pass
        for s in slots:
            _kill(s.actor)
        untrack_open_pool(self)
        self._shutdown_ray()

    def cancel(self) -> None:
        """Drop every job not finished yet, kill the judges running one, then the actors."""
        with self._lock:
            if self._cancelled:
                return
            self._closed = self._cancelled = True
            dropped = [job for q in self._queues.values() for job in q]
            for q in self._queues.values():
                q.clear()
            slots = list(self._slots)
            self._lock.notify_all()
        for job in dropped:
            job.future.cancel()
        refs = []
        for s in slots:
            try:
                refs.append(s.actor.cancel.remote())
            except RayError:
                pass
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=_CANCEL_WAIT_S)
        for s in slots:
            _kill(s.actor)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(cancel=exc_type is not None)

    # -- internals -----------------------------------------------------------------------------

    def _task(self, task: Any, config: EvalConfig) -> Task:
        return task if isinstance(task, Task) else load_task(task, config.shapes)

    def _groups(self) -> set[str]:
        return {s.group for s in self._slots}

    def _group_for(self, task: Task) -> str:
        """The environment group `task`'s jobs go to: pinned at its first job, to the group with
        the least queued work per actor (caller holds the lock)."""
        groups = self._groups()
        group = self._pins.get(task.hash)
        if group not in groups:

            def load(g: str) -> float:
                actors = [s for s in self._slots if s.group == g]
                busy = sum(s.job is not None for s in actors)
                return (len(self._queues.get(g, ())) + busy) / len(actors)

            group = min(sorted(groups), key=load)
            self._pins[task.hash] = group
        return group

    def _submit(self, kind: str, task: Any, source: str, config: EvalConfig) -> Future:
        if self._closed:
            raise RuntimeError("this RayPool is closed")
        task = self._task(task, config)
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("this RayPool is closed")
            group = self._group_for(task)
            self._queues.setdefault(group, collections.deque()).append(
                _Job(kind, task, source, config, future, group)
            )
            self._unfinished += 1
            self._lock.notify_all()
        return future

    def _start_actors(self, count: int) -> list[_Slot]:
        """`count` actors started at once; those that fail are left out, with a note."""
        actors = [self._actor_class.remote(self.cpu) for _ in range(count)]
        refs = [a.describe.remote() for a in actors]
        slots = []
        for actor, ref in zip(actors, refs):
            slot = self._await_start(actor, ref)
            if slot is not None:
                slots.append(slot)
        return slots

    def _await_start(self, actor: Any, ref: Any) -> _Slot | None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline and not self._cancelled:
            if self._closed and self._unfinished == 0 and self._threads:  # a late replacement
                _kill(actor)
                return None
            try:
                environment, place = ray.get(ref, timeout=_POLL_S * 5)
            except GetTimeoutError:
                continue
            except RayError as e:
                self.notes.append(f"an evaluator actor failed to start: {_first_line(e)}")
                _kill(actor)
                return None
            slot = _Slot(actor, environment, place)
            with self._lock:
                self._slots.add(slot)
                self._queues.setdefault(slot.group, collections.deque())
            self.stats["started"] += 1
            return slot
        if not self._cancelled:
            self.notes.append(f"an evaluator actor did not start within {_START_TIMEOUT_S:g} s")
        _kill(actor)
        return None

    def _next(self, slot: _Slot) -> _Job | None:
        """The next job of the slot's group; None once closed and every job has its result."""
        with self._lock:
            while True:
                if self._cancelled:
                    return None
                queue = self._queues.get(slot.group)
                if queue:
                    slot.job = queue.popleft()
                    return slot.job
                if self._closed and self._unfinished == 0:
                    return None
                self._lock.wait(_POLL_S * 5)

    def _serve(self, slot: _Slot | None) -> None:
        while slot is not None:
            job = self._next(slot)
            if job is None:
                return
            outcome, value = self._run(slot, job)
            if outcome == "cancelled" or self._cancelled:
                job.future.cancel()
                self._finished(slot)
                continue
            if outcome == "lost":
                slot = self._lost(slot, job, value)
                continue
            self.stats["evaluated"] += 1
            self._finished(slot)
            job.future.set_result(value)

    def _finished(self, slot: _Slot) -> None:
        with self._lock:
            slot.job = None
            self._unfinished -= 1
            self._lock.notify_all()

    def _run(self, slot: _Slot, job: _Job) -> tuple[str, Any]:
        """("done", result), ("lost", error) when the actor died, or ("cancelled", None)."""
        try:
            ref = slot.actor.run.remote(job.kind, job.task, job.source, job.config)
        except RayError as e:
            return "lost", e
        while True:
            ready, _ = ray.wait([ref], timeout=_POLL_S)
            if self._cancelled:
                return "cancelled", None
            if not ready:
                continue
            try:
                return "done", ray.get(ref)
            except RayTaskError as e:  # the actor's method raised: a kernelwright bug
                message = f"internal executor error (a kernelwright bug): {_first_line(e)}"
                return "done", self._failure(job, message, slot.environment)
            except RayError as e:  # the actor, its node or the object is gone
                return "lost", e

    def _lost(self, slot: _Slot, job: _Job, error: Exception) -> _Slot | None:
        """The slot's actor died under `job`: send the job again (at most max_retries times) and
        put a new actor in the slot's place (None: none could start)."""
        job.losses += 1
        job.lost_on.append(slot.where)
        with self._lock:
            self._slots.discard(slot)
            slot.job = None
        _kill(slot.actor)
        if job.losses > self.max_retries:
            where = ", ".join(job.lost_on)
            self._finished(slot)
            job.future.set_result(
                self._failure(
                    job,
                    f"the Ray actor evaluating this died {job.losses} time(s) (on {where}; "
                    f"--max-retries {self.max_retries}): {_first_line(error)}. Nothing was "
                    "learned about the candidate; a resumed run evaluates it again.",
                    slot.environment,
                )
            )
        else:
            self.stats["retried"] += 1
            with self._lock:  # to the front: it was next before, it stays next
                self._queues.setdefault(job.group, collections.deque()).appendleft(job)
                self._lock.notify_all()
        for _ in range(_RESTART_ATTEMPTS):
            if self._cancelled or (self._closed and self._unfinished == 0):
                return None
            actor = self._actor_class.remote(self.cpu)
            new = self._await_start(actor, actor.describe.remote())
            if new is not None:
                self.stats["replaced"] += 1
                return new
        self._give_up_if_alone()
        return None

    def _give_up_if_alone(self) -> None:
        """No actor is left: every queued job gets an executor failure instead of waiting."""
        with self._lock:
            if self._slots:
                return
            stranded = [job for q in self._queues.values() for job in q]
            for q in self._queues.values():
                q.clear()
            self._unfinished -= len(stranded)
            self._lock.notify_all()
        why = "; ".join(self.notes[-3:]) or "no actor could be started again"
        for job in stranded:
            job.future.set_result(
                self._failure(job, f"no Ray actor is left to evaluate this: {why}", None)
            )

    def _failure(self, job: _Job, message: str, env: Environment | None):
        return failure_result(
            job.kind,
            job.task,
            job.source,
            job.config,
            "crashed",
            "executor",
            message,
            env or Environment(),
        )

    def _shutdown_ray(self) -> None:
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False


def _check_reachable(address: str) -> None:
    """A head at HOST:PORT that does not answer fails in seconds, in one line: ray.init would
    retry for minutes, printing its warnings. "auto", "local" and ray:// are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=_REACH_TIMEOUT_S).close()
    except OSError as e:
        raise ExecutorError(
            f"no Ray head answers at {address} ({e}); start one with `ray start --head` there, "
            "or check --ray-address / RAY_ADDRESS"
        ) from None


def _kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except (RayError, ValueError):
        pass


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
