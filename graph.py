"""The LangGraph state machine of an optimization run: nodes, routing, the SQLite checkpointer."""

from __future__ import annotations

import sqlite3
from concurrent.futures import CancelledError
from contextlib import ExitStack, closing
from typing import Any, Literal

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send

from .agents.coder import coder
from .agents.context import RunContext, run_context
from .agents.critic import critic, human
from .agents.finalize import finalize
from .agents.planner import planner, profile
from .agents.state import CHECKPOINT_TYPES, RunState
from .agents.tester import tester
from .cluster import Evaluator, open_evaluator
from .run.config import OFFLINE_NOTE, RunConfig
from .run.lock import held, lock_path_for
from .run.owner import INTERRUPTED, run_owner
from .run.records import sync_run
from .run.rundir import EventListener, RunDir, create_run, machine_has_cuda, open_run
from .sandbox.static.pyparse import serialised
from .sandbox.task import Task
from .store import Store

# Supersteps per round: planner, coder, tester, critic (and human in chat mode).
STEPS_PER_ROUND = 5


def dispatch_candidates(state: RunState) -> list[Send] | Literal["critic"]:
    """One tester branch per new candidate; with nothing to evaluate, straight to the critic."""
    drafts = state.get("drafts") or []
    if not drafts:
        return "critic"
    return [Send("tester", {"candidate": d}) for d in drafts]


def after_profile(state: RunState) -> Literal["planner", "finalize"]:
    """Straight to finalize when the task itself is broken (its reference fails), else plan."""
    return "finalize" if state.get("stop_reason") == "task-error" else "planner"


def after_critic(state: RunState) -> Literal["planner", "finalize"]:
    """Stop when the critic recorded a stop reason, else plan the next round."""
    return "finalize" if state.get("stop_reason") else "planner"


def after_critic_chat(state: RunState) -> Literal["human", "finalize"]:
    """Chat mode: the person decides what comes next, unless a budget ended the run."""
    return "finalize" if state.get("stop_reason") else "human"


def compile_graph(checkpointer: Any = None, *, chat: bool = False) -> CompiledStateGraph:
    # Serialised: LangGraph reads the nodes' signatures with inspect, which parses (pyparse).
    with serialised():
        return build_graph(chat=chat).compile(checkpointer=checkpointer)


def sqlite_saver(conn: sqlite3.Connection) -> SqliteSaver:
    """A checkpointer that only revives the types of our state schema (no arbitrary classes)."""
    allowed = [(t.__module__, t.__name__) for t in CHECKPOINT_TYPES]
    return SqliteSaver(conn, serde=JsonPlusSerializer(allowed_msgpack_modules=allowed))


def announce_models(ctx: RunContext) -> None:
    """Record the model of each role; say so when the run is offline and how to change that."""
    models = ctx.models()
    ctx.rundir.update_run(models=models)
    if all(m == "offline" for m in models.values()):
        ctx.rundir.event("note", message=OFFLINE_NOTE)


def optimize(
    config: RunConfig,
    task_path: str | None = None,
    *,
    task: Task | None = None,
    store: Store | None = None,
    resume: str | None = None,
    answer: str | None = None,
    listeners: list[EventListener] | None = None,
    pool: Evaluator | None = None,
    start_source: str | None = None,
) -> dict[str, Any]:
    """Run (or resume, by run id) an optimization to its end; returns the final run.json.

    Chat mode (config.chat) returns when the graph waits for the person: run.json then has
    status "waiting" and `waiting_for` (the human node's question); call again with
    resume=RUN_ID and answer=their message ("/quit" ends the run).

    `task`: task_path as the caller parsed it (a suite's, a night's; any sizes), so that the
    file is not read again; on a resume, the run's task when it is that file.

    `store`: the invocation's results store, which the run records into: finalize syncs the
    run; a run that stops before it or waits for the person is synced here. By default the
    store at config.db.

    `start_source`: chat --from's kernel, evaluated as round 1's candidate when the coder is
    offline (no model could revise it).

    `pool`: an evaluator the caller keeps open across runs (a suite's, warm from the previous
    task); by default the run opens its own on config.devices and closes it at the end.
    """
    # One owner at a time: a second `optimize --resume` of the run says who holds it (Busy).
    with ExitStack() as owner:
        if resume:
            where = RunDir.at(config.out_dir, resume)
            if where.exists():  # else open_run says there is no such run
                owner.enter_context(held(lock_path_for(where.path), f"run {resume}", "resume"))
            rundir, stored, task = open_run(config.out_dir, resume, listeners, task)
            # The run's own settings, but the GPUs and executor of this invocation (another
            # job, another box, a cluster).
            config = stored.replace(**config.invocation())
        else:
            if task is None and task_path is None:
                raise ValueError("a new run needs a task file")
            rundir, config, task = create_run(config, task or task_path, listeners)
            owner.enter_context(held(lock_path_for(rundir.path), f"run {rundir.run_id}", "run"))
        if store is None and config.db:
            store = Store(config.db)
        return _drive(config, rundir, task, store, answer, pool, start_source)


def _drive(
    config: RunConfig,
    rundir: RunDir,
    task: Task,
    store: Store | None,
    answer: str | None,
    pool: Evaluator | None,
    start_source: str | None,
) -> dict[str, Any]:
    """The graph run to its end (or to the person's turn), the run directory's owner.

    The run reaches the store once per call: finalize syncs a run that ends; a run that waits
    for the person, had already finished, or stops on an exception is synced from its files
    here, with the status it was left in."""
    thread = {
        "configurable": {"thread_id": rundir.run_id},
        "recursion_limit": 10 + STEPS_PER_ROUND * config.rounds,
    }
    # Synced here after the graph: a run waiting for the person or finished earlier, and one
    # whose finalize could not sync (once more from its files; a failure now is raised).
    sync_here = False
    try:
        with ExitStack() as stack:
            if pool is None:
                pool = stack.enter_context(open_evaluator(config))
            conn = stack.enter_context(
                closing(sqlite3.connect(rundir.checkpoint_path, check_same_thread=False))
            )
            ctx: RunContext = run_context(
                config, task, rundir, pool, store, interpreter=not machine_has_cuda()
            )
            announce_models(ctx)
            app = compile_graph(sqlite_saver(conn), chat=config.chat)
            snapshot = app.get_state(thread)
            if snapshot.values and not snapshot.next:
                rundir.event("note", message="the run had already finished: nothing to resume")
                sync_here = True
            else:
                waiting = _run_graph(app, thread, ctx, bool(snapshot.values), answer, start_source)
                sync_here = waiting or ctx.store_error is not None
    except (KeyboardInterrupt, BrokenPipeError, CancelledError) as e:
        # Ctrl-C, SIGTERM (cli.Terminated), a reader that went away (`| head`), or, in a suite's
        # other jobs, the evaluations that Ctrl-C cancelled under this run: nothing went wrong
        # with the run itself, and every finished step is checkpointed.
        why = (
            "the output was closed (broken pipe)"
            if isinstance(e, BrokenPipeError)
            else (type(e).__name__)
        )
        rundir.update_run(status=INTERRUPTED, error=None, interrupted_by=why)
        _sync(store, rundir)
        raise
    except BaseException as e:
        rundir.update_run(status="failed", error=f"{type(e).__name__}: {e}")
        _sync(store, rundir)
        raise
    if sync_here:
        _sync(store, rundir)
    return rundir.read_run()


def _run_graph(
    app: CompiledStateGraph,
    thread: dict[str, Any],
    ctx: RunContext,
    resumed: bool,
    answer: str | None,
    start_source: str | None,
) -> bool:
    """The graph from its checkpoint (`resumed`) or its start to its end, or to the person's
    turn (chat mode): True when it waits for the person."""
    rundir = ctx.rundir
    rundir.update_run(status="running", waiting_for=None, owner=run_owner())
    start: Any = {"run_id": rundir.run_id, "round": 0}
    if answer is not None:  # chat: the person's first message shapes round 1
        start["instruction"] = answer
    if start_source is not None:  # chat --from: the person's kernel
        start["start_source"] = start_source
    if resumed:
        start = Command(resume=answer) if answer is not None else None
    # durability="sync": each step's checkpoint is on disk before the next step starts,
    # so a kill -9 loses at most the step in flight (finished Send branches included).
    app.invoke(start, thread, context=ctx, durability="sync")
    waiting = app.get_state(thread).interrupts
    if waiting:  # chat mode: paused for the person's next message
        rundir.update_run(status="waiting", waiting_for=waiting[0].value)
    return bool(waiting)


def _sync(store: Store | None, rundir: RunDir) -> None:
    """The run's record, read from its files, into the store (a run finalize did not end)."""
    if store is not None:
        sync_run(store, rundir.path)


def build_graph(*, chat: bool = False) -> StateGraph:
    """profile -> planner -> coder -(Send)-> tester -> critic -> planner | human | finalize."""
    builder = StateGraph(RunState, context_schema=RunContext)
    builder.add_node("profile", profile)
    builder.add_node("planner", planner)
    builder.add_node("coder", coder)
    builder.add_node("tester", tester)
    builder.add_node("critic", critic)
    builder.add_node("finalize", finalize)

    # Every run starts by timing the reference and reading its ops.
    builder.add_edge(START, "profile")
    # The first plan needs the profile; a task whose reference fails ends there.
    builder.add_conditional_edges("profile", after_profile, ["planner", "finalize"])
    # The coder writes the round's candidates from the plan.
    builder.add_edge("planner", "coder")
    # Fan out: one tester branch per candidate (Send), evaluated concurrently; none -> critic.
    builder.add_conditional_edges("coder", dispatch_candidates, ["tester", "critic"])
    # Fan in: the critic runs once every branch of the round has finished.
    builder.add_edge("tester", "critic")
    if chat:
        builder.add_node("human", human, destinations=("planner", "finalize"))
        # The critic's verdict goes to the person, or ends the run when a budget is spent.
        builder.add_conditional_edges("critic", after_critic_chat, ["human", "finalize"])
    else:
        # Another round, or stop: the critic recorded why.
        builder.add_conditional_edges("critic", after_critic, ["planner", "finalize"])
    # The best verified kernel (or "the reference stays") is written, and the run ends.
    builder.add_edge("finalize", END)
    return builder
