"""The run directory: run.json, each round's files, best.py, events.jsonl (a line per step).

RunDir is the only code that knows the directory's paths: the others ask it (RunDir.at,
read_run, run_candidates, best_files, candidate_key) instead of joining file names themselves.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..sandbox.results import EvalResult
from .config import RunConfig
from .owner import run_owner

if TYPE_CHECKING:  # the task loader imports torch: loaded by what creates or resumes a run only
    from ..sandbox.task import Task

EventListener = Callable[[dict[str, Any]], None]

# The files of a run directory.
RUN_JSON = "run.json"
TASK_PY = "task.py"  # the task as the run started it (a resume falls back on it)
BEST_PY = "best.py"
EVENTS = "events.jsonl"
CHECKPOINT = "checkpoint.sqlite"
# ... and of each candidate's directory, round_NN/cand_K/: the coder's kernel and its verdict,
# and the launch-constant sweep's variant with its own when it beat the seed.
KERNEL_PY, RESULT_JSON = "kernel.py", "result.json"
TUNED_PY, TUNED_RESULT_JSON = "tuned.py", "tuned_result.json"
# ... and of each round's directory, round_NN/: the planner's plan.
PLAN_JSON = "plan.json"
# A candidate's key, its directory relative to the run: round_NN/cand_K (a pattern to find one
# inside a text, such as a duplicate's "same source as round_01/cand_1").
CANDIDATE_KEY = r"round_(\d+)/cand_(\d+)"
_ROUND_DIR, _CAND_DIR = re.compile(r"round_(\d+)$"), re.compile(r"cand_(\d+)$")


def candidate_key(round_no: int, index: int) -> str:
    """'round_01/cand_1': candidate `index` of round `round_no`, relative to the run."""
    return f"round_{round_no:02d}/cand_{index}"


def parse_candidate_key(key: str) -> tuple[int, int] | None:
    """(round, index) of a candidate key ('round_01/cand_1'), or None when it is not one."""
    match = re.fullmatch(CANDIDATE_KEY, key)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _numbered_dirs(parent: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    found = [(pattern.match(p.name), p) for p in parent.iterdir() if p.is_dir()]
    return sorted((int(m.group(1)), p) for m, p in found if m)


def new_run_id(task_name: str) -> str:
    """'softmax-20250101-120000-3f9a': sortable by time, unique across concurrent runs."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in task_name)[:40] or "task"
    return f"{safe}-{stamp}-{secrets.token_hex(2)}"


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def _write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


class RunDir:
    """Writes one run's directory. Thread-safe: tester branches write concurrently."""

    def __init__(
        self, path: str | os.PathLike[str], listeners: list[EventListener] | None = None
    ) -> None:
        self.path = Path(path)
        self.listeners = list(listeners or [])
        self._lock = threading.Lock()

    @classmethod
    def at(
        cls,
        out_dir: str | os.PathLike[str],
        run_id: str,
        listeners: list[EventListener] | None = None,
    ) -> RunDir:
        """The directory of run `run_id` under `out_dir` (which may not exist)."""
        return cls(Path(out_dir) / run_id, listeners)

    def exists(self) -> bool:
        """Whether this is a run directory: it has its run.json."""
        return self.run_json.is_file()

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def task_py(self) -> Path:
        return self.path / TASK_PY

    @property
    def best_py(self) -> Path:
        return self.path / BEST_PY

    # -- run.json ----------------------------------------------------------------------------
    def read_run(self) -> dict[str, Any]:
        return json.loads(self.run_json.read_text())

    def update_run(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into run.json (read, update, atomic rewrite); what the file now holds
        (as JSON reads it back: lists, not tuples)."""
        with self._lock:
            path = self.run_json
            data = json.loads(path.read_text()) if path.exists() else {}
            data.update(fields)
            text = _dump(data)
            _write_atomic(path, text)
            written: dict[str, Any] = json.loads(text)
            return written

    def copy_task(self, task_path: str | Path) -> Path:
        dst = self.task_py
        shutil.copyfile(task_path, dst)
        return dst

    # -- events ------------------------------------------------------------------------------
    def event(self, name: str, **fields: Any) -> dict[str, Any]:
        """Append one line to events.jsonl and tell the listeners (the CLI's progress view)."""
        record = {"ts": now_iso(), "event": name, **fields}
        self.record(record)
        return record

    def record(self, record: dict[str, Any]) -> None:
        """Append an event that already has its ts and name (the LLM client's events)."""
        line = json.dumps(record, default=str)
        with self._lock, open(self.path / EVENTS, "a") as f:
            f.write(line + "\n")
        for listener in self.listeners:
            listener(record)

    def events(self) -> list[dict[str, Any]]:
        path = self.path / EVENTS
        if not path.exists():
            return []
        lines = path.read_text().splitlines()
        # A kill -9 mid-write can leave a torn last line; everything before it is whole.
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    # -- rounds and candidates ---------------------------------------------------------------
    def round_dir(self, round_no: int) -> Path:
        return self.path / f"round_{round_no:02d}"

    def candidate_dir(self, round_no: int, index: int) -> Path:
        return self.path / candidate_key(round_no, index)

    def round_dirs(self) -> list[tuple[int, Path]]:
        """(number, directory) of every round_NN directory, in order."""
        return _numbered_dirs(self.path, _ROUND_DIR)

    def candidate_dirs(self) -> list[tuple[int, int, Path]]:
        """(round, index, directory) of every round_NN/cand_K directory, evaluated or not."""
        return [
            (r, k, cand_dir)
            for r, round_dir in self.round_dirs()
            for k, cand_dir in _numbered_dirs(round_dir, _CAND_DIR)
        ]

    def plan_json(self, round_no: int) -> Path:
        return self.round_dir(round_no) / PLAN_JSON

    def write_round_json(self, round_no: int, name: str, data: dict[str, Any]) -> Path:
        path = self.round_dir(round_no) / name
        _write_atomic(path, _dump(data))
        return path

    def write_round_file(self, round_no: int, name: str, text: str) -> Path:
        path = self.round_dir(round_no) / name
        _write_atomic(path, text)
        return path

    def write_candidate_file(self, round_no: int, index: int, name: str, text: str) -> Path:
        path = self.candidate_dir(round_no, index) / name
        _write_atomic(path, text)
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.path / name
        _write_atomic(path, text)
        return path

    def write_best(self, source: str) -> str:
        """best.py: the winner's source under BEST_PY_HEADER; its path relative to the run."""
        return self.relative(self.write_text(BEST_PY, best_py_text(source)))

    def remove_best(self) -> None:
        """No winner: never leave a stale best.py from an earlier attempt."""
        if self.best_py.exists():
            self.best_py.unlink()

    def relative(self, path: Path) -> str:
        return str(Path(path).relative_to(self.path))

    # -- reading candidates ------------------------------------------------------------------
    def candidates(self) -> list[CandidateFiles]:
        """Every evaluated candidate of the run, in round then index order."""
        found = []
        for cand_dir in self.path.glob("round_*/cand_*"):
            if cand_dir.parent.name[6:].isdigit() and cand_dir.name[5:].isdigit():
                files = candidate_files(cand_dir)
                if files is not None:
                    found.append(files)
        return sorted(found, key=lambda c: (c.round, c.index))

    def best(self) -> CandidateFiles | None:
        """The run's winner (run.json's best) with its source as best.py holds it, or None."""
        best = self.read_run().get("best")
        if not best:
            return None
        files = candidate_files(self.candidate_dir(best["round"], best["candidate"]))
        if files is None:
            return None
        best_py = self.path / (best.get("path") or BEST_PY)
        if best_py.is_file():
            files = dataclasses.replace(files, source=best_py.read_text())
        return files


# -- reading a run directory ----------------------------------------------------------------------
@dataclass(frozen=True)
class CandidateFiles:
    """One evaluated candidate as its directory holds it: the final source and its verdict."""

    round: int
    index: int
    source: str  # tuned.py when the sweep improved it, else kernel.py
    result: EvalResult  # tuned_result.json, else result.json
    tuned: bool

    @property
    def key(self) -> str:
        return candidate_key(self.round, self.index)


def read_run(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    return RunDir(run_dir).read_run()


def tuned_won(cand_dir: Path) -> bool:
    """The rule for a candidate's verdict: the sweep's variant when it beat the seed (the tester
    writes tuned.py and tuned_result.json only then), else the seed's kernel.py and result.json."""
    return (cand_dir / TUNED_PY).is_file() and (cand_dir / TUNED_RESULT_JSON).is_file()


def candidate_files(cand_dir: Path) -> CandidateFiles | None:
    """The candidate in `cand_dir` (round_NN/cand_K), or None when it was never evaluated."""
    tuned = tuned_won(cand_dir)
    source_file = cand_dir / (TUNED_PY if tuned else KERNEL_PY)
    result_file = cand_dir / (TUNED_RESULT_JSON if tuned else RESULT_JSON)
    if not (source_file.is_file() and result_file.is_file()):
        return None
    try:
        result = EvalResult.from_json(result_file.read_text())
    except (ValueError, TypeError, KeyError):  # a result.json torn by a kill
        return None
    return CandidateFiles(
        round=int(cand_dir.parent.name.removeprefix("round_")),
        index=int(cand_dir.name.removeprefix("cand_")),
        source=source_file.read_text(),
        result=result,
        tuned=tuned,
    )


def run_candidates(run_dir: str | os.PathLike[str]) -> list[CandidateFiles]:
    """Every evaluated candidate of a run, in round then index order."""
    return RunDir(run_dir).candidates()


def best_files(run_dir: str | os.PathLike[str]) -> CandidateFiles | None:
    """The run's winner (run.json's best) with its source as best.py holds it, or None."""
    return RunDir(run_dir).best()


# -- finalize -------------------------------------------------------------------------------------
# best.py's header. A verified kernel is verified forward: its Triton kernels define no backward,
# so backward() through its outputs fails ("element 0 of tensors does not require grad") or
# leaves the inputs without a gradient. No run id in it: two runs that find the same kernel
# write the same best.py.
BEST_PY_HEADER = (
    "# kernelwright: the verified ModelNew of this run (report.md says what it was judged at).\n"
    "# Forward only: its Triton kernels define no backward, so backward() through its outputs\n"
    '# fails ("element 0 of tensors does not require grad") or leaves the inputs without a\n'
    "# gradient. Train with the task's reference Model and load its state_dict into ModelNew;\n"
    "# `kernelwright export RUN --to FILE.py` writes a module whose backward() says so.\n\n"
)


def best_py_text(source: str) -> str:
    """best.py's text for the winner's `source`: BEST_PY_HEADER above it."""
    return BEST_PY_HEADER + source


def without_best_header(text: str) -> str:
    """best.py's kernel as the candidate wrote it (BEST_PY_HEADER removed)."""
    return text[len(BEST_PY_HEADER) :] if text.startswith(BEST_PY_HEADER) else text


# -- starting and reopening runs ------------------------------------------------------------------
def machine_has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def environment_info() -> dict[str, Any]:
    import platform

    import torch
    import triton

    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": cuda,
        "gpu": torch.cuda.get_device_name(0) if cuda else "",
        "interpreter": not cuda,
    }


def at_sizes(task: Task, shapes: Mapping[str, Any]) -> Task:
    """`task` with its overrides set to `shapes` (checked as load_task checks them): the same
    Task that load_task(task.path, shapes) gives, without reading the file again."""
    from ..sandbox.task import checked_overrides

    return dataclasses.replace(task, overrides=checked_overrides(task, shapes))


def shrunk_for_interpreter(config: RunConfig, task: Task) -> tuple[RunConfig, Task, str]:
    """Without CUDA and without --shape: smaller sizes (the interpreter costs ~1 ms a program)."""
    from .shrink import interpreter_sizes

    shapes, note = interpreter_sizes(task, config.shapes, config.cpu_input_bytes)
    if config.shapes or not shapes:
        return config, task, note
    return config.replace(shapes=shapes), at_sizes(task, shapes), note


def create_run(
    config: RunConfig, task: str | Task, listeners: list[EventListener] | None = None
) -> tuple[RunDir, RunConfig, Task]:
    """A new run directory for `task`, a task file's path or the Task the caller parsed (taken
    at config.shapes whatever sizes it was parsed at; shrunk for the interpreter when needed)."""
    from ..sandbox.task import load_task

    if isinstance(task, str):
        task = load_task(task, config.shapes)
    else:
        task = at_sizes(task, config.shapes)
    # Absolute, so that a store shared by several out directories knows where each run lives.
    config = config.replace(out_dir=str(Path(config.out_dir).resolve()))
    notes, given = [], dict(config.shapes)
    if not machine_has_cuda():
        config, task, note = shrunk_for_interpreter(config, task)
        notes.append(note)
    # What the sizes are and why, for the reports: the task's own, --shape's, or the shrink's.
    sized_by = "shape" if given else ("shrink" if task.overrides else "task")
    rundir = RunDir.at(config.out_dir, new_run_id(task.name), listeners)
    rundir.path.mkdir(parents=True)
    rundir.copy_task(task.path)
    rundir.update_run(
        run_id=rundir.run_id,
        task=task.path,
        task_name=task.name,
        task_hash=task.hash,
        sizes=task.sizes,
        task_sizes=task.constants,
        sized_by=sized_by,
        created=now_iso(),
        status="running",
        owner=run_owner(),
        stop_reason=None,
        best=None,
        config=config.to_dict(),
        environment=environment_info(),
        notes=notes,
    )
    rundir.event("run.start", run_id=rundir.run_id, task_name=task.name, path=str(rundir.path))
    for note in notes:
        rundir.event("note", message=note)
    return rundir, config, task


def run_task(rundir: RunDir, given: Task | None = None) -> Task:
    """A run's task at its sizes, each file read at most once: the original (`given`: the
    caller's parse of it, at any sizes), else the run directory's copy when the original is
    gone or changed."""
    from ..sandbox.task import TaskError, load_task

    run = rundir.read_run()
    config = RunConfig.from_dict(run["config"])
    task_path = run["task"]
    if Path(task_path).is_file():
        if given is not None and Path(given.path) == Path(task_path).resolve():
            task = at_sizes(given, config.shapes)
        else:
            task = load_task(task_path, config.shapes)
        if task.hash == run["task_hash"]:
            return task
    task = load_task(str(rundir.task_py), config.shapes)
    if task.hash != run["task_hash"]:
        raise TaskError(f"run {rundir.run_id}: its task.py no longer matches the hash in run.json")
    return task


def open_run(
    out_dir: str,
    run_id: str,
    listeners: list[EventListener] | None = None,
    task: Task | None = None,
) -> tuple[RunDir, RunConfig, Task]:
    """An existing run to resume: its own config and task (the copy in the run directory when
    the original file is gone or changed). `task`: the run's task file as the caller parsed
    it (a suite's), used when it is the same file at the run's sizes, so it is not read again."""
    from ..sandbox.task import TaskError

    rundir = RunDir.at(out_dir, run_id, listeners)
    if not rundir.exists():
        raise TaskError(f"no run {run_id!r} under {out_dir} (expected {rundir.run_json})")
    run = rundir.read_run()
    config = RunConfig.from_dict(run["config"])
    task = run_task(rundir, task)
    verified = [c.result for c in rundir.candidates() if c.result.ok]
    speedups = [r.speedup_eager for r in verified if r.speedup_eager is not None]
    rundir.event(
        "run.resume",
        run_id=run_id,
        task_name=run.get("task_name", ""),
        verified=len(verified),
        best_speedup=max(speedups, default=None),
    )
    return rundir, config, task
