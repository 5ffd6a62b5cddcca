"""One run as a typed record: what its run.json says, every candidate's kernels and verdicts, the
plans' summaries, the event log and best.py.

finalize builds it once, at the end of a run, and hands the same record to the run report
(report/run.py) and to the store (records.sync_record). RunRecord.load reads an older run's
directory the same way, for `kernelwright report` and for runs that were killed before their
finalize. The files are found through RunDir; nothing here joins a file name of its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sandbox.results import EvalResult
from .config import RunConfig
from .rundir import (
    BEST_PY,
    KERNEL_PY,
    RESULT_JSON,
    TUNED_PY,
    TUNED_RESULT_JSON,
    RunDir,
    candidate_key,
)


def _read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (a run killed mid-write)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_text(path: Path) -> str | None:
    return path.read_text(errors="replace") if path.is_file() else None


def _load_result(path: Path) -> EvalResult | None:
    data = _read_json(path)
    if not isinstance(data, dict):
        return None
    try:
        return EvalResult.from_dict(data)
    except (TypeError, ValueError, KeyError):  # a result.json torn by a kill
        return None


@dataclass(frozen=True)
class CandidateRecord:
    """One candidate directory (round_NN/cand_K): the coder's kernel, the judge's verdict on it,
    and the launch-constant sweep's variant with its verdict when that beat the seed."""

    round: int
    index: int
    kernel: str | None = None  # kernel.py; None when the coder wrote none
    result: EvalResult | None = None  # result.json: the seed's verdict; None: not evaluated yet
    tuned_kernel: str | None = None  # tuned.py
    tuned_result: EvalResult | None = None  # tuned_result.json

    @property
    def key(self) -> str:
        return candidate_key(self.round, self.index)

    @property
    def tuned(self) -> bool:
        """The sweep's variant is the candidate's verdict (the tester writes both files then)."""
        return self.tuned_kernel is not None and self.tuned_result is not None

    @property
    def verdict(self) -> EvalResult | None:
        """The verdict that stands for the candidate: the tuned variant's, else the seed's."""
        return self.tuned_result if self.tuned else self.result

    @property
    def source(self) -> str | None:
        """The source the verdict is of."""
        return self.tuned_kernel if self.tuned else self.kernel

    @property
    def kernel_path(self) -> str | None:
        """kernel.py relative to the run directory, when there is one."""
        return f"{self.key}/{KERNEL_PY}" if self.kernel is not None else None

    @property
    def tuned_path(self) -> str | None:
        return f"{self.key}/{TUNED_PY}" if self.tuned else None

    @classmethod
    def read(cls, round_no: int, index: int, cand_dir: Path) -> CandidateRecord:
        tuned_kernel = _read_text(cand_dir / TUNED_PY)
        return cls(
            round=round_no,
            index=index,
            kernel=_read_text(cand_dir / KERNEL_PY),
            result=_load_result(cand_dir / RESULT_JSON),
            tuned_kernel=tuned_kernel,
            tuned_result=_load_result(cand_dir / TUNED_RESULT_JSON) if tuned_kernel else None,
        )


@dataclass(frozen=True)
class BestRecord:
    """run.json's best: where the winner is and what it achieved."""

    round: int
    candidate: int
    path: str | None = None  # best.py, relative to the run
    speedup_eager: float | None = None
    speedup_compiled: float | None = None
    roofline_fraction: float | None = None

    @classmethod
    def of(cls, best: Any) -> BestRecord | None:
        if not isinstance(best, Mapping) or not best:
            return None
        return cls(
            round=best.get("round", 0),
            candidate=best.get("candidate", 0),
            path=best.get("path"),
            speedup_eager=best.get("speedup_eager"),
            speedup_compiled=best.get("speedup_compiled"),
            roofline_fraction=best.get("roofline_fraction"),
        )


@dataclass(frozen=True)
class Winner:
    """The run's verified winner as the store keeps it: its source and the verdict on it."""

    key: str
    source: str
    result: EvalResult


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class RunRecord:
    """One run: its run.json, candidates, plans, log and best.py (see the module's docstring)."""

    path: Path  # the run directory: where the report's files go
    run: Mapping[str, Any]  # run.json as written
    candidates: tuple[CandidateRecord, ...] = ()  # every candidate directory, in order
    plan_summaries: Mapping[int, str] = field(default_factory=dict)  # round -> its plan's
    events: tuple[Mapping[str, Any], ...] = ()  # events.jsonl, less a line torn by a kill
    best_py: str | None = None  # best.py's text, when there is one

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def load(cls, run_dir: RunDir | str | os.PathLike[str]) -> RunRecord:
        """The record of the run in `run_dir`, from its files."""
        rundir = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        run = _read_json(rundir.run_json)
        if not isinstance(run, dict):
            raise FileNotFoundError(f"{rundir.run_json} is missing or not JSON: not a run dir?")
        plans = {n: _plan_summary(_read_json(rundir.plan_json(n))) for n, _ in rundir.round_dirs()}
        return cls.of(
            rundir,
            run,
            plan_summaries={n: s for n, s in plans.items() if s},
            best_py=_read_text(rundir.best_py),
        )

    @classmethod
    def of(
        cls,
        rundir: RunDir,
        run: Mapping[str, Any],
        *,
        plan_summaries: Mapping[int, str],
        best_py: str | None,
        known: Mapping[tuple[int, int], CandidateRecord] | None = None,
    ) -> RunRecord:
        """The record of a run whose run.json, plans and best.py the caller holds (finalize has
        just written them), and the candidates it holds (`known`, by (round, index): the graph's
        state, their verdicts typed). Any other candidate directory (one the state does not
        account for: an attempt killed before its checkpoint) and the log are read through
        `rundir`."""
        known = known or {}
        return cls(
            path=rundir.path,
            run=dict(run),
            candidates=tuple(
                known.get((r, k)) or CandidateRecord.read(r, k, d)
                for r, k, d in rundir.candidate_dirs()
            ),
            plan_summaries=dict(plan_summaries),
            events=tuple(e for e in rundir.events() if isinstance(e, dict)),
            best_py=best_py,
        )

    # -- what run.json says --------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return str(self.run.get("run_id") or self.path.name)

    @property
    def task_path(self) -> str:
        return str(self.run.get("task") or "")

    @property
    def task_name(self) -> str:
        return str(self.run.get("task_name") or "")

    @property
    def task_hash(self) -> str:
        return str(self.run.get("task_hash") or "")

    @property
    def created(self) -> str | None:
        return self.run.get("created")

    @property
    def finished(self) -> str | None:
        return self.run.get("finished")

    @property
    def status(self) -> str:
        """The status run.json records (run.owner.run_status reads a dead owner's as
        interrupted)."""
        return str(self.run.get("status") or "running")

    @property
    def stop_reason(self) -> str | None:
        return self.run.get("stop_reason")

    @property
    def config(self) -> dict[str, Any]:
        """RunConfig.to_dict() of the run (dtype, precision, shapes, budgets, models)."""
        return _mapping(self.run.get("config"))

    @property
    def run_config(self) -> RunConfig:
        return RunConfig.from_dict(self.config)

    @property
    def models(self) -> dict[str, str]:
        """{role: model} as the run used them ("offline" for the rules)."""
        return _mapping(self.run.get("models"))

    @property
    def usage(self) -> dict[str, Any]:
        """agents.state.Usage.to_dict(): LLM calls, tokens and cost, in total and per agent."""
        return _mapping(self.run.get("usage"))

    @property
    def environment(self) -> dict[str, Any]:
        return _mapping(self.run.get("environment"))

    @property
    def profile(self) -> dict[str, Any]:
        """The profile node's timings of the reference (eager, torch.compile, the roofline)."""
        return _mapping(self.run.get("profile"))

    @property
    def rounds(self) -> list[Mapping[str, Any]]:
        """run.json's rounds (agents.state.round_summaries), each with its number."""
        rows = self.run.get("rounds") or []
        return [r for r in rows if isinstance(r, Mapping) and "round" in r]

    @property
    def candidate_rows(self) -> list[Mapping[str, Any]]:
        """run.json's candidates: the agents' view (origin, idea, status, duplicates)."""
        rows = self.run.get("candidates") or []
        return [
            r
            for r in rows
            if isinstance(r, Mapping)
            and isinstance(r.get("round"), int)
            and isinstance(r.get("candidate"), int)
        ]

    @property
    def best(self) -> BestRecord | None:
        return BestRecord.of(self.run.get("best"))

    @property
    def elapsed_s(self) -> float | None:
        return self.run.get("elapsed_s")

    # -- the files -----------------------------------------------------------------------------
    def candidate(self, round_no: int, index: int) -> CandidateRecord | None:
        return next((c for c in self.candidates if (c.round, c.index) == (round_no, index)), None)

    @property
    def winner(self) -> Winner | None:
        """run.json's best with its verdict and source (best.py's, else the candidate's), or None
        when it names none or its candidate has no verdict on disk."""
        best = self.best
        cand = self.candidate(best.round, best.candidate) if best else None
        if best is None or cand is None or cand.verdict is None or cand.source is None:
            return None
        named = best.path or BEST_PY
        by_path = {cand.kernel_path: cand.kernel, cand.tuned_path: cand.tuned_kernel}
        source = self.best_py if named == BEST_PY else by_path.get(named)
        return Winner(cand.key, source if source is not None else cand.source, cand.verdict)


def _plan_summary(plan: Any) -> str:
    """What a round's plan.json says it tries."""
    if isinstance(plan, dict):
        for key in ("summary", "plan_summary", "rationale"):
            if plan.get(key):
                return str(plan[key])
    return ""


def plan_summaries(summaries: Sequence[str]) -> dict[int, str]:
    """{round: summary} of the plans of rounds 1, 2, ... (those that say something)."""
    return {n: s for n, s in enumerate(summaries, 1) if s}
