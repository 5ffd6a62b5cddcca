"""Chat: a person steers one run round by round from the terminal, over the graph's
interrupt/resume (a chat can be left at any prompt and resumed later with --resume RUN_ID).

Each message becomes the next round's instruction: the coder revises, the tester evaluates, the
critic answers. The kernel versions are the verified kernels of the rounds, in order (plus the
--from kernel first); /undo steps back through them and the next round starts from the one it
lands on. graph.optimize is passed in (`optimize`): agents/ never imports graph.py.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..agents.context import llm_configs
from ..errors import KernelwrightError
from ..report.verdict import verdict
from ..run.config import OFFLINE, OFFLINE_NOTE, RunConfig, eval_config_for
from ..run.owner import INTERRUPTED, run_status
from ..run.rundir import RunDir, run_candidates, run_task
from ..sandbox.judge.summary import format_result
from ..sandbox.results import EvalResult
from ..sandbox.task import Task, load_task
from ..store import Store
from .common import UserError, open_store, owning, read_file, resumed_config, run_config
from .progress import plain_listener

Optimize = Callable[..., dict[str, Any]]
Judge = Callable[..., EvalResult]  # sandbox.evaluate(task, source, config)
CHAT_FILE = "chat.json"

HELP = """\
Say what to try next ("tile the reduction in two passes", "use bf16 accumulation"): the coder
revises the current kernel, the tester evaluates it, the critic answers. Commands:
  /diff          the current kernel against the previous version (unified diff)
  /undo          back to the previous version: the next round starts from it
  /bench         re-time the current kernel through the evaluator and print its verdict
  /save PATH     write the current kernel to PATH
  /quit          end the run (writes best.py and the report)
  /help          this text
End of input (Ctrl-D) leaves the chat without ending the run: resume it with
`kernelwright chat --resume RUN_ID`."""


# Offline, the coder is the deterministic fusion codegen: it writes the same kernel whatever the
# person asks, so a request would run a round that can only repeat the last one (a "duplicate"),
# and the rules' critic would then tell the person to "change the approach".
OFFLINE_HELP = """\
No model is configured, so a request in words cannot be acted on: offline, the coder is the
fusion codegen, which writes the same kernel whatever is asked. What works offline:
  /bench         judge the current kernel again (and time it, on a GPU)
  # tune:        a module constant with `# tune: 256, 512, 1024` on its line is swept over those
                 values by the tester, on a GPU where times mean something
  --from         /save PATH, edit the kernel, then `kernelwright chat TASK --from PATH`: round 1
                 judges your version (and sweeps its `# tune:` constants on a GPU);
                 `kernelwright eval TASK PATH` judges it once
To have requests acted on: set OPENAI_API_KEY (OPENAI_BASE_URL for another endpoint) and pass
--model, e.g. `kernelwright chat TASK --from PATH --model gpt-4o`."""


class ChatError(KernelwrightError):
    """A chat that cannot start or go on as asked: one line."""

    fault = "configuration"


@dataclass(frozen=True)
class Version:
    """A kernel version: the --from kernel, or a round's verified kernel."""

    key: str  # "from" or "round_02/cand_1"
    source: str
    summary: str


def start_kernel(spec: str, out_dir: str) -> tuple[str, str]:
    """(label, source) of --from: a run id (its best.py) or a kernel file."""
    run_dir = RunDir.at(out_dir, spec)
    if run_dir.best_py.is_file():
        return f"run {spec}", run_dir.best_py.read_text()
    if run_dir.exists():
        raise ChatError(f"run {spec} has no verified kernel (no best.py) to start from")
    path = Path(spec)
    if path.is_file():
        return str(path), path.read_text()
    raise ChatError(f"--from {spec!r} is neither a run under {out_dir} nor a kernel file")


@dataclass
class ChatSession:
    """One chat over run `run_id` under `out_dir`, reading `inp` and writing `out`."""

    optimize: Optimize
    out_dir: str
    run_id: str
    inp: IO[str]
    out: IO[str]
    judge: Judge | None = None  # default: sandbox.evaluate
    store: Store | None = None
    run: dict[str, Any] = field(default_factory=dict)
    task: Task | None = None  # the run's task as parsed once for the chat (run_task)

    # -- files -----------------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        return Path(self.out_dir) / self.run_id

    def chat_state(self) -> dict[str, Any]:
        path = self.run_dir / CHAT_FILE
        return json.loads(path.read_text()) if path.is_file() else {"from": None, "undone": []}

    def save_state(self, state: dict[str, Any]) -> None:
        (self.run_dir / CHAT_FILE).write_text(json.dumps(state, indent=2) + "\n")

    def read_run(self) -> dict[str, Any]:
        return RunDir(self.run_dir).read_run()

    # -- versions --------------------------------------------------------------------------------
    def versions(self) -> list[Version]:
        """The kernel versions not undone, in the order they came: each round's fastest verified
        candidate, with the --from kernel after the rounds that ran before it was brought in."""
        state = self.chat_state()
        by_round: dict[int, list[Any]] = {}
        for c in run_candidates(self.run_dir):
            if c.result.ok:
                by_round.setdefault(c.round, []).append(c)
        found: list[tuple[float, Version]] = []
        for number, cands in by_round.items():
            best = max(cands, key=lambda c: c.result.speedup_eager or 0.0)
            found.append((number, Version(best.key, best.source, best.result.summary())))
        start = state.get("from")
        if start:
            # After the round it followed (round 1 runs before the person's first message).
            order = start.get("after_round", 0) + 0.5
            found.append((order, Version("from", start["source"], f"from {start['label']}")))
        undone = set(state.get("undone") or [])
        return [v for _, v in sorted(found, key=lambda item: item[0]) if v.key not in undone]

    def current(self) -> Version | None:
        versions = self.versions()
        return versions[-1] if versions else None

    def instruction(self, text: str) -> str:
        """The person's message, plus the kernel to start from when it is not the one the coder
        would take (the graph's best): after /undo, or with --from."""
        cur = self.current()
        graph_best = str((self.run.get("waiting_for") or {}).get("best") or "").split(":")[0]
        if cur is None or cur.key == graph_best:
            return text
        return (
            f"{text}\n\nStart from this version of the kernel ({cur.key}: {cur.summary}), "
            f"not from the best kernel shown above:\n```python\n{cur.source.rstrip()}\n```"
        )

    # -- output ----------------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def show_turn(self) -> None:
        """The round's verdicts, the critic's answer, and the current kernel."""
        waiting = self.run.get("waiting_for") or {}
        number = waiting.get("round", 0)
        for c in run_candidates(self.run_dir):
            if c.round == number:
                self.say(f"  {c.key}: {c.result.summary()}")
        critique = RunDir(self.run_dir).round_dir(number) / "critique.json"
        if critique.is_file():
            crit = json.loads(critique.read_text())
            self.say(f"critic: {crit.get('summary', '')}")
            for fb in crit.get("feedback") or []:
                self.say(f"  - cand {fb['candidate']}: {fb['problem']} -> {fb['fix']}")
        cur = self.current()
        self.say(f"current kernel: {cur.key} ({cur.summary})" if cur else "no verified kernel yet")
        self.say("your turn (/help for commands):")

    # -- commands --------------------------------------------------------------------------------
    def diff(self) -> None:
        versions = self.versions()
        if len(versions) < 2:
            self.say("only one version so far: nothing to diff" if versions else "no kernel yet")
            return
        before, after = versions[-2], versions[-1]
        lines = difflib.unified_diff(
            before.source.splitlines(keepends=True),
            after.source.splitlines(keepends=True),
            fromfile=before.key,
            tofile=after.key,
        )
        self.out.write("".join(lines) or "the two versions are identical\n")

    def undo(self) -> None:
        versions = self.versions()
        if len(versions) < 2:
            self.say("nothing to undo: there is no earlier version")
            return
        state = self.chat_state()
        state["undone"] = [*state.get("undone", []), versions[-1].key]
        self.save_state(state)
        back = versions[-2].key
        self.say(f"undid {versions[-1].key}; current kernel: {back}, the next round starts from it")

    def bench(self) -> None:
        cur = self.current()
        if cur is None:
            self.say("no verified kernel to time yet")
            return
        from ..sandbox import evaluate

        config = RunConfig.from_dict(self.run["config"])
        result = (self.judge or evaluate)(self.run_task(), cur.source, eval_config_for(config))
        self.say(f"{cur.key}:")
        self.say(format_result(result, task_name=self.run.get("task_name", "")))

    def run_task(self) -> Task:
        """The run's task at its sizes, parsed once for the whole chat: every turn resumes the
        run with it (and /bench judges with it) instead of reading the task file again."""
        if self.task is None:
            self.task = run_task(RunDir(self.run_dir))
        return self.task

    def save(self, where: str) -> None:
        cur = self.current()
        if not where:
            self.say("usage: /save PATH")
        elif cur is None:
            self.say("no verified kernel to save yet")
        else:
            Path(where).write_text(cur.source)
            self.say(f"wrote {where} ({cur.key})")

    # -- the loop --------------------------------------------------------------------------------
    def advance(self, answer: str | None) -> None:
        """One step of the graph: the answer goes to the waiting human node."""
        # Every turn resumes the run: no news to the person, but the resume event tells the
        # status line what the earlier rounds verified (its best so far).
        shown = plain_listener(self.out, quiet=("run.resume",))

        def listener(event: dict[str, Any]) -> None:
            # Said once, at the chat's start: each turn resumes the run and would say it again.
            if not (event.get("event") == "note" and event.get("message") == OFFLINE_NOTE):
                shown(event)

        config = RunConfig(out_dir=self.out_dir)
        # The run syncs itself into the chat's store (waiting for the person, or finalized).
        self.run = self.optimize(
            config,
            resume=self.run_id,
            answer=answer,
            listeners=[listener],
            store=self.store,
            task=self.run_task(),
        )

    def offline(self) -> bool:
        """The run's coder has no model: it cannot act on a request in words."""
        return (self.run.get("models") or {}).get("coder") == OFFLINE

    def read_line(self) -> str | None:
        if self.inp.isatty():
            self.out.write("> ")
            self.out.flush()
        line = self.inp.readline()
        return None if line == "" else line.strip()

    def loop(self) -> int:
        """Read and act until /quit (run ends), end of input (chat left) or the budget ends it.

        Ctrl-C leaves the chat as end of input does (exit 130); a round it cuts short is
        finished when the chat is resumed.
        """
        try:
            return self._loop()
        except KeyboardInterrupt:
            self.say(f"\ninterrupted; resume with: kernelwright chat --resume {self.run_id}")
            return 130

    def _loop(self) -> int:
        self.run = self.read_run()
        if self.run.get("status") == "done":
            self.say(verdict(self.run))
            return 0
        self.show_turn()
        while True:
            text = self.read_line()
            if text is None:
                self.say(f"left the chat; resume it with: kernelwright chat --resume {self.run_id}")
                return 0
            if not text:
                continue
            if text.startswith("/"):
                if self.command(text):
                    return 0
                continue
            if self.offline():
                self.say(OFFLINE_HELP)
                continue
            self.advance(self.instruction(text))
            if self.run.get("status") == "done":
                self.say(verdict(self.run))
                return 0
            self.show_turn()

    def command(self, text: str) -> bool:
        """Run a slash command; True when it ended the chat."""
        name, _, arg = text.partition(" ")
        if name in ("/quit", "/exit"):
            self.advance("/quit")
            self.say(f"run directory: {self.run_dir}")
            self.say(verdict(self.run))
            return True
        actions: dict[str, Callable[[], None]] = {
            "/help": lambda: self.say(HELP),
            "/diff": self.diff,
            "/undo": self.undo,
            "/bench": self.bench,
            "/save": lambda: self.save(arg.strip()),
        }
        action = actions.get(name)
        if action is None:
            self.say(f"unknown command {name}: /help lists them")
        else:
            action()
        return False


def start_chat(
    optimize: Optimize,
    config: RunConfig,
    task_path: str,
    *,
    inp: IO[str],
    out: IO[str],
    start_from: str | None = None,
    judge: Judge | None = None,
    store: Store | None = None,
) -> ChatSession:
    """A new chat run: round 1 runs from the task (and --from kernel), then the person steers."""
    first = start_kernel(start_from, config.out_dir) if start_from else None
    # Round 1 runs before the first message; with --from it already revises that kernel, or,
    # offline (no model to revise it), judges it as given.
    seed, offline = None, llm_configs(config)["coder"].offline
    if first is not None:
        seed = (
            f"Start from the person's kernel ({first[0]}) and improve it:\n"
            f"```python\n{first[1].rstrip()}\n```"
        )
    extra = {"start_source": first[1]} if first is not None and offline else {}
    task = load_task(task_path, config.shapes)  # once for the chat: each turn resumes with it
    run = optimize(
        config.replace(chat=True),
        task_path,
        task=task,
        answer=seed,
        listeners=[plain_listener(out)],
        store=store,
        **extra,
    )
    session = ChatSession(
        optimize, config.out_dir, run["run_id"], inp, out, judge, store, run, task
    )
    if first is not None:
        # Offline, round 1 judged the --from kernel: its verdict (round_01/cand_1) comes after.
        after = 0 if extra else (run.get("waiting_for") or {}).get("round", 0)
        start = {"label": first[0], "source": first[1], "after_round": after}
        session.save_state({"from": start, "undone": []})
    return session


def resume_chat(
    optimize: Optimize,
    out_dir: str,
    run_id: str,
    *,
    inp: IO[str],
    out: IO[str],
    judge: Judge | None = None,
    store: Store | None = None,
) -> ChatSession:
    """An earlier chat, from where it was left (a round cut short by a kill is finished first)."""
    rundir = RunDir.at(out_dir, run_id)
    if not rundir.exists():
        raise ChatError(f"no run {run_id!r} under {out_dir} (expected {rundir.run_json})")
    run = rundir.read_run()
    if not (run.get("config") or {}).get("chat"):
        raise ChatError(
            f"run {run_id} is not a chat (resume it with kernelwright optimize --resume)"
        )
    session = ChatSession(optimize, out_dir, run_id, inp, out, judge, store, run)
    if all(m == OFFLINE for m in (run.get("models") or {}).values()) and run.get("models"):
        session.say(f"note: {OFFLINE_NOTE}")  # at the start, not after the first message
    if run_status(run) in ("running", INTERRUPTED, "failed"):
        session.advance(None)
    return session


# -- the command ----------------------------------------------------------------------------------
def cmd_chat(args: argparse.Namespace) -> int:
    from ..graph import optimize
    from ..run.lock import lock_path_for
    from ..sandbox.task import TaskError
    from .preflight import PreflightError, check_models

    if bool(args.task) == bool(args.resume):
        raise UserError("chat needs a TASK file, or --resume RUN_ID to continue a chat")
    if args.task:
        read_file(args.task, "task")
    if args.resume and args.start_from:
        raise UserError("--from starts a new chat; it cannot be combined with --resume")
    # One candidate per message unless asked: the person reads each verdict before the next.
    config = run_config(args, candidates=args.candidates or 1)
    resumed = resumed_config(config.out_dir, args.resume) if args.resume else None
    store = open_store((resumed.db if resumed else None) or config.db)
    # One owner of the run for the whole chat, its waits for the person too.
    owner = ExitStack()
    try:
        if resumed is not None:
            check_models(resumed)
            run_dir = RunDir.at(config.out_dir, args.resume).path
            owner.enter_context(owning(lock_path_for(run_dir), f"run {args.resume}", "chat"))
            session = resume_chat(
                optimize, config.out_dir, args.resume, inp=sys.stdin, out=sys.stdout, store=store
            )
        else:
            session = start_chat(
                optimize,
                config,
                args.task,
                inp=sys.stdin,
                out=sys.stdout,
                start_from=args.start_from,
                store=store,
            )
            where = lock_path_for(session.run_dir)
            owner.enter_context(owning(where, f"run {session.run_id}", "chat"))
        with owner:
            return session.loop()
    except (ChatError, PreflightError, TaskError, ValueError) as e:
        raise UserError(str(e)) from None
