"""The live view of a run: what its events say so far (round, candidates and their status, best
speedup, tokens, cost), drawn as a rich Live table on a terminal or as plain lines in a log;
format_event is the one home of each event's progress line."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..run.rundir import EventListener

# Candidate statuses as the view colours them (rich styles).
STATUS_STYLES = {
    "ok": "green",
    "evaluating": "cyan",
    "pending": "dim",
    "duplicate": "dim",
    "incorrect": "red",
    "rejected": "red",
    "compile_error": "red",
    "runtime_error": "red",
    "timeout": "yellow",
    "crashed": "yellow",
    "no_code": "yellow",
}


@dataclass
class CandidateView:
    round: int
    index: int
    origin: str = ""
    status: str = "pending"
    summary: str = ""
    cached: bool = False


@dataclass
class RunProgress:
    """What a run's events have said so far; `update` takes each event in turn."""

    run_id: str = ""
    task_name: str = ""
    round: int = 0
    plan: str = ""
    candidates: dict[tuple[int, int], CandidateView] = field(default_factory=dict)
    best_speedup: float | None = None  # over eager, among verified candidates with timings
    verified: int = 0
    calls: int = 0
    failed_calls: int = 0
    switched_off: bool = False  # the circuit breaker stopped calling an endpoint
    tokens: int = 0
    cost_usd: float = 0.0
    stop: str = ""

    def update(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        if kind in ("run.start", "run.resume"):
            self.run_id = event.get("run_id", self.run_id)
            self.task_name = event.get("task_name", self.task_name)
            # A resumed run (optimize --resume, every chat turn) starts from what its earlier
            # rounds verified: without this its status line said "none yet" after a verified
            # round 1.
            self.verified = max(self.verified, int(event.get("verified") or 0))
            self._best(event.get("best_speedup"))
        elif kind == "plan":
            self.round, self.plan = event.get("round", self.round), event.get("summary", "")
        elif kind.startswith("candidate."):
            self._candidate(kind, event)
        elif kind == "llm.call":
            self.calls += 1
            self.tokens += event.get("prompt_tokens", 0) + event.get("completion_tokens", 0)
            self.cost_usd += event.get("cost_usd", 0.0) or 0.0
        elif kind == "llm.error":
            self.failed_calls += 1
        elif kind == "llm.circuit_open":
            self.switched_off = True
        elif kind == "stop":
            self.stop = f"{event.get('reason')}: {event.get('detail', '')}".rstrip(": ")

    def _candidate(self, kind: str, event: dict[str, Any]) -> None:
        key = (event.get("round", self.round), event.get("index", 0))
        view = self.candidates.setdefault(key, CandidateView(*key))
        if kind == "candidate.evaluating":
            view.status, view.origin = "evaluating", event.get("origin", "")
        elif kind in ("candidate.evaluated", "candidate.skipped"):
            view.status = event.get("status", view.status)
            view.summary = event.get("summary", "")
            view.cached = bool(event.get("cached"))
            if kind == "candidate.evaluated" and view.status == "ok":
                self.verified += 1
                self._best(event.get("speedup_eager"))
        elif kind == "candidate.tuned" and "summary" in event:  # the sweep's variant now stands
            view.summary = event["summary"]
            self._best(event.get("speedup_eager"))

    def _best(self, speedup: float | None) -> None:
        if speedup is not None and (self.best_speedup or 0.0) < speedup:
            self.best_speedup = speedup

    def best_text(self) -> str:
        if self.best_speedup is not None:
            return f"{self.best_speedup:.2f}x vs eager"
        if self.verified:
            return f"{self.verified} verified (no timings here)"
        return "none yet"

    def llm_text(self) -> str:
        failed = f", {self.failed_calls} failed" if self.failed_calls else ""
        off = " (endpoint switched off)" if self.switched_off else ""
        return f"{self.calls} calls{failed}{off}, {self.tokens} tokens, ${self.cost_usd:.4f}"

    def status_line(self) -> str:
        """One line: round, statuses of this round, best so far, tokens and cost."""
        ours = [c for (r, _), c in sorted(self.candidates.items()) if r == self.round]
        counts: dict[str, int] = {}
        for c in ours:
            counts[c.status] = counts.get(c.status, 0) + 1
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no candidate yet"
        return (
            f"round {self.round}: {statuses} | best so far: {self.best_text()} | "
            f"{self.tokens} tokens, ${self.cost_usd:.4f}"
            + (f", {self.failed_calls} LLM call(s) failed" if self.failed_calls else "")
            + (" (endpoint switched off)" if self.switched_off else "")
        )

    def table(self) -> Any:
        """The rich renderable of the live view: this round's candidates and the totals.

        Cells are Text, never markup: verdicts hold brackets ("incorrect [mismatch]") that rich
        would read as tags, and lines printed above a Live re-render it with markup off.
        """
        from rich.table import Table
        from rich.text import Text

        title = f"{self.task_name or 'run'}  ·  round {self.round}" + (
            f"  ·  {self.run_id}" if self.run_id else ""
        )
        caption = f"best so far: {self.best_text()}   LLM: {self.llm_text()}" + (
            f"   stop: {self.stop}" if self.stop else ""
        )
        table = Table(
            title=Text(title),
            caption=Text(caption),
            title_justify="left",
            caption_justify="left",
            expand=False,
        )
        table.add_column("cand", justify="right")
        table.add_column("origin")
        table.add_column("status")
        table.add_column("verdict", overflow="fold", max_width=70)
        for (r, index), c in sorted(self.candidates.items()):
            if r == self.round:
                status = Text(
                    c.status + (" (cached)" if c.cached else ""),
                    style=STATUS_STYLES.get(c.status, ""),
                )
                table.add_row(Text(str(index)), Text(c.origin), status, Text(c.summary))
        return table


def plain_listener(out: IO[str], prefix: str = "", quiet: tuple[str, ...] = ()) -> EventListener:
    """Progress as plain lines (a log, a pipe, CI): each step, and a status line per round.
    Events of the `quiet` kinds update the status line but print no line of their own."""
    progress, lock = RunProgress(), threading.Lock()

    def show(event: dict[str, Any]) -> None:
        with lock:
            progress.update(event)
            line = format_event(event) if event.get("event") not in quiet else None
            if line:
                cached = " (verdict from the store's cache)" if event.get("cached") else ""
                out.write(f"{prefix}{line}{cached}\n")
            if event.get("event") == "critique":
                out.write(f"{prefix}{progress.status_line()}\n")
            out.flush()

    return show


@contextlib.contextmanager
def live_listener(console: Any) -> Iterator[EventListener]:
    """A rich Live table redrawn on every event, with each step printed above it."""
    from rich.live import Live

    progress, lock = RunProgress(), threading.Lock()
    with Live(progress.table(), console=console, refresh_per_second=4) as live:

        def show(event: dict[str, Any]) -> None:
            with lock:
                progress.update(event)
                line = format_event(event)
                if line:
                    live.console.print(line, markup=False, highlight=False)
                live.update(progress.table())

        yield show


@contextlib.contextmanager
def progress_view(out: IO[str]) -> Iterator[EventListener]:
    """The live table when `out` is a terminal, plain lines otherwise."""
    if not out.isatty():
        yield plain_listener(out)
        return
    from rich.console import Console

    with live_listener(Console(file=out, highlight=False)) as show:
        yield show


# -- the progress lines: one per event the view shows ------------------------------------------
def format_event(event: dict[str, Any]) -> str | None:
    """One progress line for an event, or None for events the progress view skips."""
    kind = event.get("event", "")
    tag = f"round {event['round']}" if "round" in event else ""
    if kind == "run.start":
        return f"run {event['run_id']}: {event.get('task_name', '')} -> {event.get('path', '')}"
    if kind == "run.resume":
        return f"resuming run {event['run_id']} from its last completed step"
    if kind == "note":
        return f"note: {event['message']}"
    if kind == "profile":
        return f"profile: {event.get('summary', '')}"
    if kind == "plan":
        return f"{tag} plan ({event.get('source')}): {event.get('summary', '')}"
    if kind == "candidate.evaluated":
        return f"{tag} cand {event['index']}: {event.get('summary', '')}"
    if kind == "candidate.tuned":
        if "summary" not in event:
            trials = event.get("trials", 0)
            return f"{tag} cand {event['index']}: kept over the sweep's {trials} variants"
        changed = ", ".join(f"{k}={v}" for k, v in event.get("changed", {}).items())
        return f"{tag} cand {event['index']} tuned ({changed}): {event['summary']}"
    if kind == "candidate.skipped":
        return f"{tag} cand {event['index']}: {event.get('status')} ({event.get('summary', '')})"
    if kind == "llm.fallback":
        if event.get("circuit_open"):
            return None  # the breaker's own line said it once
        error = str(event.get("error", "")).removeprefix(f"{event.get('kind')}: ")
        return (
            f"{event.get('agent')}: LLM failed ({event.get('kind')}: {_short(error)}), "
            "using rules this step"
        )
    if kind.startswith("llm."):
        return _llm_line(kind, event)
    if kind == "critique":
        return f"{tag} critic ({event.get('source')}): {event.get('summary', '')}"
    if kind == "stop":
        return f"stop: {event.get('reason')} ({event.get('detail', '')})"
    if kind == "finalize":
        if event.get("stop_reason") == "task-error":
            return "best: none (the task's reference fails: nothing could be judged)"
        if not event.get("best"):
            if event.get("fastest"):
                against = BASELINE_WORDS.get(event.get("baseline") or "eager", "eager")
                return (
                    f"best: none faster than {against}, the reference stays (fastest verified: "
                    f"{event['fastest']}: {event.get('summary', '')})"
                )
            return "best: none (the reference stays)"
        summary = f": {event['summary']}" if event.get("summary") else ""
        return f"best: {event['best']}{summary}"
    return None


# What a run without a winner was not faster than, by its --baseline (an event written before
# the finalize event named its baseline reads as eager, as it then was).
BASELINE_WORDS = {
    "fastest": "the faster of eager and torch.compile",
    "eager": "eager",
    "compile": "torch.compile",
}


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _llm_line(kind: str, event: dict[str, Any]) -> str | None:
    """The progress line of the LLM client's events that change what the run does."""
    agent = event.get("agent", "")
    if kind == "llm.circuit_open":
        return (
            f"LLM endpoint {event.get('endpoint')} (model {event.get('model')}): "
            f"{event.get('failures')} calls in a row failed, the last with {event.get('kind')}: "
            f"{_short(str(event.get('error', '')), 300)}; it is not called again in this run, "
            "the agents use their rules"
        )
    if kind == "llm.truncated" and event.get("action") == "raised":
        return (
            f"{agent}: the reply spent its whole output budget ({event.get('max_tokens')} "
            f"tokens) on {event.get('what')}: asked again with {event.get('now')}"
        )
    if kind == "llm.truncated":
        n = event.get("continuations", 0)
        state = "complete now" if event.get("complete") else "still cut off"
        return (
            f"{agent}: the reply hit the output limit ({event.get('max_tokens')} tokens); "
            f"continued {n} time(s), {state}"
        )
    if kind == "llm.window":
        window = event.get("window")
        said = f"a {window}-token context window" if window else "a smaller output limit"
        return (
            f"{agent}: the server states {said} for {event.get('model')}; the request was fitted "
            f"to it ({event.get('now_max_tokens')} output tokens) and sent again"
        )
    if kind == "llm.param_fallback":
        now = event.get("now")
        instead = f"{now} instead" if now else "without it"
        return (
            f"{agent}: {event.get('model')} refused {event.get('param')}: sent {instead} for the "
            "rest of the run (remembered for later runs)"
        )
    if kind == "llm.remembered":
        return (
            f"note: {event.get('model')} at {event.get('endpoint')}: an earlier run learned "
            f"{event.get('facts')} (--no-cache learns afresh)"
        )
    return None
