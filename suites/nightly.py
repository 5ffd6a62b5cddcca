"""The nightly job: re-verify and re-time each task's best known kernel on this GPU and software
versions, search again where there is none or it regressed, compare with the previous night,
and (revert_on_regression) take a regressed version back.

Verification always goes through the evaluator, never the verdict cache: the point is to measure
again tonight. The optimizer is passed in (`optimize`: graph.optimize from `kernelwright
nightly`, a scripted one in tests), and so is how a search shows its progress (`progress`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..decisions import NIGHTLY_SLOWDOWN, measured
from ..kernel_versions import Revert
from ..report.nightly import nightly_changes, write_nightly_report
from ..run.config import RunConfig, eval_config_for
from ..run.records import task_hash_for
from ..run.rundir import best_files, shrunk_for_interpreter
from ..sandbox.results import Environment, EvalResult
from ..sandbox.task import Task, TaskError, load_task
from ..store import BestKernel, Store, StoreError, gpu_of, variant_key
from .tasks import Optimize, Progress, task_label


def today() -> str:
    return dt.date.today().isoformat()


@dataclass
class NightlyTask:
    """What tonight did for one task."""

    label: str
    task_hash: str = ""
    verified: EvalResult | None = None  # tonight's verdict on the best known kernel
    change: dict[str, Any] | None = None  # report.nightly.nightly_changes' row for this task
    searched: str | None = None  # the run id of tonight's search, if one ran
    new_best: EvalResult | None = None  # the search's winner, measured again
    error: str = ""
    run: dict[str, Any] = field(default_factory=dict)  # run.json of tonight's search
    # --revert-on-regression: the versions taken back tonight (a restored version that fails
    # tonight's check too is taken back as well), and tonight's verdict on the one restored.
    reverts: list[Revert] = field(default_factory=list)
    restored: EvalResult | None = None
    revert_note: str = ""  # why nothing (more) could be reverted

    @property
    def restored_ok(self) -> bool:
        return bool(self.reverts and self.restored is not None and self.restored.ok)

    @property
    def regression(self) -> bool:
        return bool(self.change and self.change["regression"])

    @property
    def evaluator_error(self) -> bool:
        """Tonight's check failed in kernelwright itself: the kernel was not measured."""
        return bool(self.change and self.change["evaluator_error"])

    @property
    def task_error(self) -> bool:
        """The task's reference fails tonight: no kernel can be judged against it."""
        return bool(self.change and self.change["task_error"])

    def line(self) -> str:
        """One line for the log."""
        if self.error:
            return f"[{self.label}] error: {self.error}"
        parts = []
        if self.verified is None:
            parts.append("no known kernel")
        elif self.regression:
            parts.append(f"REGRESSION: {self.change['reason']}")  # type: ignore[index]
        elif self.evaluator_error or self.task_error:
            parts.append(f"NOT CHECKED: {self.change['reason']}")  # type: ignore[index]
        else:
            parts.append(f"verified: {self.verified.summary()}")
            previous = (self.change or {}).get("previous_speedup_eager")
            if previous is not None:
                parts.append(f"previous night {previous:.2f}x")
        parts += self.revert_lines()
        if self.searched:
            found = self.new_best.summary() if self.new_best else "no verified kernel"
            parts.append(f"searched in run {self.searched}: {found}")
        return f"[{self.label}] " + "; ".join(parts)

    def revert_lines(self) -> list[str]:
        """'reverted v3 -> v2 (now incorrect)' per revert, and the restored version's check."""
        lines = [
            f"reverted v{r.from_version.version} -> v{r.to_version.version} ({r.reason})"
            for r in self.reverts
        ]
        if self.reverts and self.restored is not None:
            lines.append(
                f"v{self.reverts[-1].to_version.version} tonight: {self.restored.summary()}"
            )
        if self.revert_note:
            lines.append(f"not reverted: {self.revert_note}")
        return lines

    def revert_rows(self) -> list[dict[str, Any]]:
        """The report's rows of tonight's reverts (report.nightly.write_nightly_report)."""
        last = len(self.reverts) - 1
        return [
            {
                "task": r.from_version.task_name or self.label,
                "variant": r.from_version.variant,
                "env_key": r.from_version.env_key,
                "from_version": r.from_version.version,
                "to_version": r.to_version.version,
                "reason": r.reason,
                "restored": self.restored.summary() if i == last and self.restored else "",
            }
            for i, r in enumerate(self.reverts)
        ]


@dataclass
class Nightly:
    """One night over a suite. `pool` is an Evaluator (cluster/: the local pool or a Ray one)."""

    optimize: Optimize
    config: RunConfig  # how searches run (budgets, model) and what is judged (dtype, shapes)
    store: Store
    pool: Any
    out: IO[str]
    night: str = field(default_factory=today)
    slowdown: float = NIGHTLY_SLOWDOWN
    search: bool = True
    cuda: bool = False
    revert_on_regression: bool = False
    # How a search shows its progress (its lines prefixed with the task's label); None: none.
    progress: Progress | None = None

    def task_setup(self, path: Path) -> tuple[RunConfig, Task]:
        """The config and task a run of this task would use (shrunk the same way off-GPU), so
        the variant and hash match what the optimizer recorded."""
        task = load_task(path, self.config.shapes)
        if self.cuda:
            return self.config, task
        config, task, _ = shrunk_for_interpreter(self.config, task)
        return config, task

    def verify(self, task: Task, config: RunConfig, source: str) -> EvalResult:
        return self.pool.submit(task, source, eval_config_for(config)).result()

    def known_kernel(self, task_hash: str, env: Environment, variant: str) -> BestKernel | None:
        """This environment's best kernel, else the latest on this GPU (after an upgrade)."""
        exact = self.store.best_kernel(task_hash, env.key, variant)
        return exact or self.store.best_kernel_on_gpu(task_hash, gpu_of(env.key), variant)

    def change_for(self, task_hash: str, env: Environment, variant: str) -> dict[str, Any] | None:
        changes = nightly_changes(self.store.history(task_hash), self.slowdown)
        gpu = gpu_of(env.key)
        return next((c for c in changes if c["variant"] == variant and c["gpu"] == gpu), None)

    def run_task(self, path: Path) -> NightlyTask:
        label = task_label(path)
        try:
            config, task = self.task_setup(path)
        except TaskError as e:
            return NightlyTask(label, error=str(e))
        eval_config = eval_config_for(config)
        variant, task_hash = variant_key(eval_config), task_hash_for(task, eval_config)
        env: Environment = self.pool.describe(task)  # a mixed cluster: this task's GPU model
        outcome = NightlyTask(label, task_hash)
        known = self.known_kernel(task_hash, env, variant)
        if known is not None:
            result = self.verify(task, config, known.source)
            self.store.record_verification(
                result, task_name=task.name, night=self.night, variant=variant
            )
            if result.ok:  # tonight's numbers on this environment become the kernel's record
                self.store.set_best_kernel(
                    known.source,
                    result,
                    variant=variant,
                    task_name=task.name,
                    run_id=known.run_id,
                    only_if_better=False,
                    promoted_by="nightly",  # a kernel from another stack: v1 on this one
                )
            outcome.verified = result
            outcome.change = self.change_for(task_hash, env, variant)
            if self.revert_on_regression and outcome.regression:
                self.revert_regressed(task, config, outcome, (task_hash, env.key, variant))
        if self.search and (known is None or outcome.regression):
            broken = known is None or not (outcome.verified and outcome.verified.ok)
            broken = broken and not outcome.restored_ok  # a restored, verified version stays
            self.search_again(path, task, config, outcome, replace=broken)
        return outcome

    def revert_regressed(
        self, task: Task, config: RunConfig, outcome: NightlyTask, key: tuple[str, str, str]
    ) -> None:
        """Take the regressed current version back and verify the previous one tonight; one
        that fails too is taken back as well, until one passes or none is left. An evaluator
        error on the restored one stops there: it says nothing about the kernel."""
        reason = str((outcome.change or {}).get("reason") or "regressed")
        while True:
            try:
                done = self.store.revert_kernel(*key, by="nightly", reason=reason)
            except StoreError:  # no version on this environment: the kernel came from another
                done = None
            if done is None:
                where = (
                    f"before v{outcome.reverts[-1].to_version.version}"
                    if outcome.reverts
                    else ("on this environment")
                )
                outcome.revert_note = f"no earlier version {where}"
                return
            outcome.reverts.append(done)
            back = done.to_version
            outcome.restored = result = self.verify(task, config, back.source)
            if result.ok:  # its own source: only tonight's measurement is stored, no new version
                self.store.set_best_kernel(
                    back.source,
                    result,
                    variant=key[2],
                    task_name=task.name,
                    run_id=back.run_id,
                    only_if_better=False,
                    promoted_by="nightly",
                )
                return
            if not measured({"status": result.status, "rule": result.rule}):
                return
            reason = f"v{back.version} fails tonight too: {result.summary()}"

    def search_again(
        self, path: Path, task: Task, config: RunConfig, outcome: NightlyTask, *, replace: bool
    ) -> None:
        """Optimize the task within the budget; its winner, measured again, becomes the best
        kernel (`replace`: even when slower, as when the known one is broken or missing). The
        task goes to the search as task_setup parsed it: the run sizes it as a new run does."""
        prefix = f"[{outcome.label}] "
        try:
            # The night's warm evaluator: one worker per GPU, not a second pool beside it. The
            # run syncs itself into the night's store.
            run = self.optimize(
                self.config,
                str(path),
                task=task,
                store=self.store,
                listeners=[self.progress(prefix)] if self.progress is not None else [],
                pool=self.pool,
            )
        except BrokenPipeError:  # the reader of our output left (`| head`): stop the night
            raise
        except Exception as e:  # a failed search is reported; the other tasks still run tonight
            outcome.error = f"search failed: {type(e).__name__}: {e}"
            return
        run_dir = Path(self.config.out_dir) / run["run_id"]
        outcome.searched, outcome.run = run["run_id"], run
        if run.get("stop_reason") == "task-error":  # the task's own reference fails
            outcome.error = f"task error: {run.get('stop_detail', 'the reference fails')}"
            return
        winner = best_files(run_dir)
        if winner is None:
            return
        fresh = self.verify(task, config, winner.source)
        outcome.new_best = fresh
        if not fresh.ok:
            return
        variant = variant_key(eval_config_for(config))
        if outcome.verified is None:  # the first row of this task's history
            self.store.record_verification(
                fresh, task_name=task.name, night=self.night, variant=variant
            )
        self.store.set_best_kernel(
            winner.source,
            fresh,
            variant=variant,
            task_name=task.name,
            run_id=run["run_id"],
            only_if_better=not replace,
            promoted_by="nightly",
        )

    def run(self, paths: Sequence[Path]) -> list[NightlyTask]:
        outcomes = []
        for path in paths:
            outcome = self.run_task(path)
            self.out.write(outcome.line() + "\n")
            self.out.flush()
            outcomes.append(outcome)
        return outcomes

    def write_report(self, outcomes: Sequence[NightlyTask], out_dir: Path) -> dict[str, Path]:
        """report.nightly.write_nightly_report over the history of tonight's tasks."""
        history = [h for o in outcomes if o.task_hash for h in self.store.history(o.task_hash)]
        return write_nightly_report(
            history,
            out_dir,
            self.slowdown,
            title=f"kernelwright nightly {self.night}",
            reverts=[row for o in outcomes for row in o.revert_rows()],
        )


def failed(outcomes: Sequence[NightlyTask]) -> list[NightlyTask]:
    """The tasks that make the night fail: a regression, or a task that could not be checked
    (an error, an evaluator error, a reference that fails)."""
    return [o for o in outcomes if o.regression or o.error or o.evaluator_error or o.task_error]
