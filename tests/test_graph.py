"""The graph: its pinned shape, its routers, chat mode's interrupt/resume, and that a run broken
mid-round resumes from the SQLite checkpoint without re-running finished tester branches."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest
from fake_openai import reply
from langgraph.types import Command, Send
from test_agents_support import EXAMPLES, FakePool, make_context, ok_result

from kernelwright import graph
from kernelwright.agents.state import Candidate
from kernelwright.run.config import RunConfig
from kernelwright.run.rundir import BEST_PY_HEADER

pytest_plugins = ["fake_openai"]

GELU = (EXAMPLES / "gelu.py").read_text()
PLAN = {"summary": "fuse gelu", "ideas": [{"title": "one kernel", "approach": "one pass"}]}
PLAN2 = {**PLAN, "ideas": [PLAN["ideas"][0], {"title": "wide", "approach": "bigger blocks"}]}
CRITIQUE = {"summary": "fine", "feedback": [], "verdict": "continue", "reason": "try more"}

SHAPE = """\
	__start__([<p>__start__</p>]):::first
	profile(profile)
	planner(planner)
	coder(coder)
	tester(tester)
	critic(critic)
	finalize(finalize)
	__end__([<p>__end__</p>]):::last
	__start__ --> profile;
	coder -.-> critic;
	coder -.-> tester;
	critic -.-> finalize;
	critic -.-> planner;
	planner --> coder;
	profile -.-> finalize;
	profile -.-> planner;
	tester --> critic;
	finalize --> __end__;"""
CHAT_SHAPE = """\
	__start__([<p>__start__</p>]):::first
	profile(profile)
	planner(planner)
	coder(coder)
	tester(tester)
	critic(critic)
	finalize(finalize)
	human(human)
	__end__([<p>__end__</p>]):::last
	__start__ --> profile;
	coder -.-> critic;
	coder -.-> tester;
	critic -.-> finalize;
	critic -.-> human;
	human -.-> finalize;
	human -.-> planner;
	planner --> coder;
	profile -.-> finalize;
	profile -.-> planner;
	tester --> critic;
	finalize --> __end__;"""


def _shape(mermaid: str) -> str:
    """Node and edge lines of draw_mermaid() (styling and front matter left out)."""
    lines = mermaid.splitlines()
    return "\n".join(ln for ln in lines if ln.startswith("\t") and "classDef" not in ln)


@pytest.mark.parametrize("chat, shape", [(False, SHAPE), (True, CHAT_SHAPE)], ids=["run", "chat"])
def test_graph_shape_is_pinned(chat: bool, shape: str) -> None:
    """draw_mermaid() snapshot: conditional edges (-.->) are the fan-out and the routers."""
    assert _shape(graph.build_graph(chat=chat).compile().get_graph().draw_mermaid()) == shape


def test_routers() -> None:
    drafts = [Candidate(round=1, index=i, source="x") for i in (1, 2)]
    sends = graph.dispatch_candidates({"drafts": drafts})
    assert sends == [Send("tester", {"candidate": d}) for d in drafts]
    assert graph.dispatch_candidates({"drafts": []}) == "critic"
    assert graph.after_critic({"stop_reason": "patience"}) == "finalize"
    assert graph.after_critic({}) == "planner"
    assert graph.after_critic_chat({}) == "human"


def _app(ctx, conn, *, chat: bool = False):
    return graph.compile_graph(graph.sqlite_saver(conn), chat=chat)


def test_chat_mode_waits_for_the_person_and_resumes(tmp_path, fake_openai) -> None:
    fake_openai.route("You are the planner", [reply(json.dumps(PLAN), times=None)])
    fake_openai.route("You are the coder", [reply(f"```python\n{GELU}```", times=None)])
    fake_openai.route("You are the critic", [reply(json.dumps(CRITIQUE), times=None)])
    pool = FakePool()
    ctx = make_context(tmp_path, pool, RunConfig(candidates=1, chat=True, fusion_seed=False))
    thread = {"configurable": {"thread_id": "chat-1"}}
    with sqlite3.connect(tmp_path / "ck.sqlite", check_same_thread=False) as conn:
        app = _app(ctx, conn, chat=True)
        out = app.invoke({"run_id": "chat-1"}, thread, context=ctx)
        assert out["__interrupt__"][0].value["best"].startswith("round_01/cand_1")
        out = app.invoke(Command(resume="use 2048-wide blocks"), thread, context=ctx)
        assert "__interrupt__" in out and out["round"] == 2
        planner_asks = [r.messages for r in fake_openai.chat_requests if "planner" in r.system]
        assert 'asks: "use 2048-wide blocks"' in planner_asks[-1][1]["content"]
        out = app.invoke(Command(resume="/quit"), thread, context=ctx)
    assert out["stop_reason"] == "user" and "__interrupt__" not in out
    # best.py says it is forward-only before the kernel (rundir.BEST_PY_HEADER).
    assert (ctx.rundir.path / "best.py").read_text() == BEST_PY_HEADER + GELU.strip() + "\n"
    assert len(pool.calls) == 1  # round 2 wrote the same file: recognised, not re-evaluated


def test_resume_keeps_finished_tester_branches(tmp_path, fake_openai) -> None:
    """A round that breaks after one branch finished resumes without re-running that branch."""
    other = GELU.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048")
    fake_openai.route("You are the planner", [reply(json.dumps(PLAN2), times=None)])
    fake_openai.route(
        "You are the coder",
        [reply(f"```python\n{GELU}```"), reply(f"```python\n{other}```")],
    )
    fake_openai.route("You are the critic", [reply(json.dumps(CRITIQUE), times=None)])
    first_done, fail_once = threading.Event(), [True]

    def verdict(source: str):
        if "BLOCK_SIZE = 2048" in source:
            first_done.wait(10)  # the other branch has finished (and saved its write)
            if fail_once.pop() if fail_once else False:
                raise RuntimeError("machine lost mid-round")
        else:
            first_done.set()
        return ok_result()

    pool = FakePool(verdict)
    config = RunConfig(candidates=2, rounds=1, fusion_seed=False)
    ctx = make_context(tmp_path, pool, config)
    thread = {"configurable": {"thread_id": "resume-1"}}
    with sqlite3.connect(tmp_path / "ck.sqlite", check_same_thread=False) as conn:
        app = _app(ctx, conn)
        with pytest.raises(RuntimeError, match="machine lost"):
            app.invoke({"run_id": "resume-1"}, thread, context=ctx, durability="sync")
        assert app.get_state(thread).next == ("tester",)
        out = app.invoke(None, thread, context=ctx, durability="sync")
    assert sorted(c.index for c in out["candidates"]) == [1, 2]
    # Candidate 1 was evaluated once; candidate 2 twice (its first evaluation was lost).
    assert sorted("BLOCK_SIZE = 1024" in s for s in pool.calls) == [False, False, True]
    assert out["stop_reason"] == "rounds"
