"""`kernelwright optimize` end to end on CPU: the real openai client against the scripted local
server (tests/fake_openai.py), the real evaluator under the Triton interpreter, the real SQLite
checkpointer. Each test reads back what a user would: run.json, best.py, events.jsonl."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fake_openai import reply, stall
from test_agents_support import EXAMPLES, TASKS

from kernelwright import cli
from kernelwright.run.rundir import BEST_PY_HEADER

pytest_plugins = ["fake_openai"]
# These runs assert the interpreter's semantics (correctness only, first verified = best);
# test_optimize_gpu.py asserts the timed ones.
pytestmark = [
    pytest.mark.skipif(
        torch.cuda.is_available(),
        reason="CPU (Triton interpreter) semantics; see test_optimize_gpu.py",
    ),
    pytest.mark.slow,
]

TASK = str(TASKS / "gelu.py")
GOOD = (EXAMPLES / "gelu.py").read_text()
# A missing colon: the coder is told the line once, then the evaluator says compile_error.
COMPILE_ERROR = GOOD.replace("def gelu_tanh(x: torch.Tensor) -> torch.Tensor:", "def gelu_tanh(x)")
# The cubic term's coefficient is wrong: every element off by a little.
WRONG = GOOD.replace("0.044715", "0.07")
PLAN = {"summary": "fuse gelu", "ideas": [{"title": "one kernel", "approach": "one pass"}]}
CRITIQUE = {
    "summary": "see feedback",
    "feedback": [{"candidate": 1, "problem": "p", "fix": "f"}],
    "verdict": "continue",
    "reason": "more to gain",
}
# One candidate a round, one correctness trial, no launch-constant sweep: the cheapest run that
# still goes through every node and the real evaluator.
FAST = ["--candidates", "1", "--trials", "1", "--no-tune", "--no-fusion-seed"]


def code(source: str) -> str:
    return f"Here is the kernel.\n```python\n{source}```\n"


def script(fake, coder_steps, *, planner=None, critic=None) -> None:
    fake.route("You are the planner", planner or [reply(json.dumps(PLAN), times=None)])
    fake.route("You are the coder", coder_steps)
    fake.route("You are the critic", critic or [reply(json.dumps(CRITIQUE), times=None)])


def optimize(out: Path, *args: str) -> dict:
    """Run the CLI in-process; the run directory's run.json, with its path added."""
    assert cli.main(["optimize", TASK, "--out", str(out), *FAST, *args]) == 0
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return {**json.loads((run_dir / "run.json").read_text()), "dir": run_dir}


def events(run_dir: Path, name: str | None = None) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    found = [json.loads(line) for line in lines if line.strip()]
    return [e for e in found if name is None or e["event"] == name]


def statuses(run: dict) -> list[tuple[int, str]]:
    return [(c["round"], c["status"]) for c in run["candidates"]]


def test_compile_error_then_wrong_then_correct_then_patience(tmp_path, fake_openai, capsys):
    steps = (COMPILE_ERROR, COMPILE_ERROR, WRONG, GOOD, GOOD)
    script(fake_openai, [reply(code(s)) for s in steps])
    run = optimize(tmp_path / "runs", "--rounds", "6", "--patience", "1")
    assert statuses(run) == [(1, "compile_error"), (2, "incorrect"), (3, "ok"), (4, "duplicate")]
    (followup,) = events(run["dir"], "coder.followup")
    assert followup["round"] == 1 and followup["rule"] == "syntax"
    assert run["stop_reason"] == "patience" and run["status"] == "done"
    assert (run["dir"] / "best.py").read_text() == BEST_PY_HEADER + GOOD.strip() + "\n"
    assert run["best"]["round"] == 3 and run["timing_meaningful"] is False
    # The critic's LLM verdicts were used; the coder saw round 2's feedback in round 3.
    assert json.loads((run["dir"] / "round_02" / "critique.json").read_text())["source"] == "llm"
    coder_prompts = [r for r in fake_openai.chat_requests if "You are the coder" in r.system]
    assert len(coder_prompts) == 5
    assert "Critic's feedback" in coder_prompts[3].messages[1]["content"]
    for n, name in ((1, "compile_error"), (2, "incorrect")):
        result = json.loads((run["dir"] / f"round_0{n}" / "cand_1" / "result.json").read_text())
        assert result["status"] == name
    printed = capsys.readouterr().out
    assert "run directory:" in printed and "not meaningful" in printed
    assert "report_error" not in run and (run["dir"] / "report.md").is_file()
    assert not fake_openai.unexpected


def test_rate_limit_then_success(tmp_path, fake_openai):
    from fake_openai import error

    limited = error(429, "slow down", headers={"Retry-After": "0"})
    script(fake_openai, [limited, reply(code(GOOD))])
    run = optimize(tmp_path / "runs", "--rounds", "1")
    assert statuses(run) == [(1, "ok")]
    retries = events(run["dir"], "llm.retry")
    assert [(e["agent"], e["status"]) for e in retries] == [("coder", 429)]
    assert not events(run["dir"], "llm.fallback")


def test_timeout_mid_run_falls_back_to_rules(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_LLM_MAX_RETRIES", "1")  # two 1 s timeouts, then give up
    planner = [reply(json.dumps(PLAN)), stall(times=None)]
    script(fake_openai, [reply(code(WRONG)), reply(code(GOOD))], planner=planner)
    run = optimize(tmp_path / "runs", "--rounds", "2")
    fallbacks = events(run["dir"], "llm.fallback")
    assert [(e["agent"], e["round"], e["kind"]) for e in fallbacks] == [("planner", 2, "timeout")]
    plans = [json.loads((run["dir"] / f"round_0{n}" / "plan.json").read_text()) for n in (1, 2)]
    assert [p["source"] for p in plans] == ["llm", "rules"]
    assert statuses(run) == [(1, "incorrect"), (2, "ok")]  # the run went on with the rules' plan


def test_an_endpoint_failing_every_call_is_switched_off_and_the_run_exits_3(
    tmp_path, fake_openai, monkeypatch, capsys
):
    """Issue 13: an endpoint answering 500 to everything ran 121 s, sent 150 requests over 3
    rounds and exited 0, its only sign a "using rules this step" line."""
    from fake_openai import error

    monkeypatch.setenv("KERNELWRIGHT_LLM_MAX_RETRIES", "1")
    fake_openai.script([error(500, "upstream exploded", times=None)])
    out = tmp_path / "runs"
    code = cli.main(["optimize", TASK, "--out", str(out), *FAST, "--rounds", "3"])
    assert code == 3
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    run = json.loads((run_dir / "run.json").read_text())
    # Round 1's planner, coder and critic: three calls of two attempts, then none at all.
    assert len(fake_openai.chat_requests) == 6 and len(run["rounds"]) >= 2
    (opened,) = events(run_dir, "llm.circuit_open")
    assert opened["failures"] == 3 and "upstream exploded" in opened["error"]
    printed = capsys.readouterr()
    assert printed.out.count("not called again in this run") == 1
    assert printed.out.count("LLM failed") == 3  # round 1's; the rest were never sent
    assert "answered no call for planner (gpt-4o-mini), coder (gpt-4o-mini)" in printed.err
    assert "--fallback-offline" in printed.err
    assert set(run["llm_unanswered"]) == {"planner", "coder", "critic"}
    per_agent = run["usage"]["per_agent"]
    assert per_agent["planner"]["failed_calls"] == 1 and per_agent["planner"]["refused_calls"]
    assert per_agent["coder"]["failures"] == {"server": 1} and per_agent["coder"]["retries"] == 1
    report = (run_dir / "report.md").read_text()
    assert "| coder | gpt-4o-mini | 1 | 0 | 1 (1 server) |" in report
    assert "The configured model answered no call" in report
    # --fallback-offline accepts such a run (the breaker is per run: three calls again).
    code = cli.main(
        [
            "optimize",
            TASK,
            "--out",
            str(tmp_path / "b"),
            *FAST,
            "--rounds",
            "1",
            "--fallback-offline",
        ]
    )
    assert code == 0 and "Accepted (--fallback-offline)" in capsys.readouterr().err


def test_a_reasoning_model_alias_costs_two_400s_per_run_not_per_step(tmp_path, fake_openai):
    from fake_openai import ReasoningModel

    fake_openai.serve(ReasoningModel())
    # Served without a reasoning parser, the planner's reasoning comes inline, before its JSON.
    planner = [reply(f"<think>fuse {{it}} ```all```</think>{json.dumps(PLAN)}", times=None)]
    script(fake_openai, [reply(code(WRONG)), reply(code(GOOD))], planner=planner)
    run = optimize(tmp_path / "runs", "--rounds", "2", "--model", "kw-o3-deployment")
    assert statuses(run) == [(1, "incorrect"), (2, "ok")]
    plan = json.loads((run["dir"] / "round_01" / "plan.json").read_text())
    assert plan["source"] == "llm" and not events(run["dir"], "llm.repair")
    assert "fuse {it}" in (run["dir"] / "round_01" / "planner_reasoning.md").read_text()
    assert len(fake_openai.refused) == 2  # max_tokens, then temperature; 6 steps asked
    assert len(events(run["dir"], "llm.param_fallback")) == 2
    assert run["usage"]["retries"] == 2 and run["usage"]["failed_calls"] == 0
    # A deployment name no price table knows: its cost is 0, and the reports say why.
    note = "no price known for model 'kw-o3-deployment': cost counted as 0"
    assert run["usage"]["notes"] == [note]
    assert note in (run["dir"] / "report.md").read_text()


def test_malformed_json_is_repaired(tmp_path, fake_openai):
    planner = [reply('{"summary": "fuse", "ideas": [{"title": '), reply(json.dumps(PLAN))]
    script(fake_openai, [reply(code(GOOD))], planner=planner)
    run = optimize(tmp_path / "runs", "--rounds", "1")
    (repair,) = events(run["dir"], "llm.repair")
    assert repair["agent"] == "planner" and "invalid JSON" in repair["error"]
    plan = json.loads((run["dir"] / "round_01" / "plan.json").read_text())
    assert plan["source"] == "llm" and plan["summary"] == PLAN["summary"]


def test_token_budget_stops_the_run(tmp_path, fake_openai):
    usage = (3000, 500)  # every call reports 3.5k tokens
    planner = [reply(json.dumps(PLAN), usage=usage, times=None)]
    critic = [reply(json.dumps(CRITIQUE), usage=usage, times=None)]
    script(fake_openai, [reply(code(WRONG), usage=usage)], planner=planner, critic=critic)
    run = optimize(tmp_path / "runs", "--rounds", "5", "--budget-tokens", "8000")
    assert run["stop_reason"] == "tokens" and len(run["rounds"]) == 1
    assert "8000" in run["stop_detail"] and run["usage"]["prompt_tokens"] == 9000
    assert run["best"] is None and not (run["dir"] / "best.py").exists()


def test_second_identical_run_is_served_from_the_cache(tmp_path, fake_openai):
    script(fake_openai, [reply(code(WRONG)), reply(code(GOOD))])
    first = optimize(tmp_path / "a", "--rounds", "2")
    served = len(fake_openai.chat_requests)
    assert served == 6 and statuses(first) == [(1, "incorrect"), (2, "ok")]
    second = optimize(tmp_path / "b", "--rounds", "2")
    assert len(fake_openai.chat_requests) == served  # not one request reached the server
    assert second["usage"]["cached_calls"] == second["usage"]["calls"] == 6
    assert second["usage"]["cost_usd"] == 0
    assert statuses(second) == statuses(first)
    assert (second["dir"] / "best.py").read_text() == (first["dir"] / "best.py").read_text()


def test_offline_run_end_to_end(tmp_path, monkeypatch):
    """No key, no model: rules plan and criticise, the fusion codegen writes the kernel."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("KERNELWRIGHT_MODEL", raising=False)
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["optimize", str(TASKS / "softmax.py"), "--out", str(tmp_path / "runs")]) == 0
    # The runs directory holds the run and, since no --db was given, its own store.
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert (tmp_path / "runs" / "kernelwright.db").is_file()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["models"] == {"planner": "offline", "coder": "offline", "critic": "offline"}
    assert run["usage"]["calls"] == 0 and run["status"] == "done"
    cand = run_dir / "round_01" / "cand_1"
    if (cand / "kernel.py").exists():  # the fusion codegen wrote a kernel: it was judged
        result = json.loads((cand / "result.json").read_text())
        assert run["stop_reason"] == "exhausted"
        assert (run["best"] is not None) == (result["status"] == "ok")
        assert (run_dir / "best.py").exists() == (result["status"] == "ok")
    else:
        assert run["stop_reason"] == "no-candidate" and run["best"] is None


# -- kill -9 and --resume -------------------------------------------------------------------------
def _count_rows(checkpoint: Path, channel: str) -> int:
    try:
        with sqlite3.connect(f"file:{checkpoint}?mode=ro", uri=True, timeout=0.1) as conn:
            row = conn.execute("SELECT COUNT(*) FROM writes WHERE channel = ?", (channel,))
            return row.fetchone()[0]
    except sqlite3.Error:
        return 0


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_kill_during_round_two_then_resume(tmp_path, fake_openai):
    """SIGKILL while round 2's second candidate is being evaluated; --resume finishes the run and
    the candidate that had finished before the kill is not evaluated again."""
    slow = GOOD.replace("BLOCK_SIZE = 1024  #", "BLOCK_SIZE = 128  #")  # 8x the programs
    two = {**PLAN, "ideas": [*PLAN["ideas"], {"title": "small blocks", "approach": "128 wide"}]}
    planner = [reply(json.dumps(PLAN)), reply(json.dumps(two))]  # 1 candidate, then 2
    script(fake_openai, [reply(code(s)) for s in (WRONG, GOOD, slow)], planner=planner)
    out = tmp_path / "runs"
    args = ["optimize", TASK, "--out", str(out), *FAST, "--rounds", "2", "--workers", "1"]
    args[args.index("--candidates") + 1] = "2"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelwright.cli", *args, "--patience", "3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        run_dir = _wait_for(lambda: next(iter(out.glob("gelu-*")), None), 120, "the run dir")
        checkpoint = run_dir / "checkpoint.sqlite"

        def round2(name: str) -> list[dict]:
            try:  # the run dir appears before its events file, and a line may be half written
                return [e for e in events(run_dir, name) if e.get("round") == 2]
            except (FileNotFoundError, json.JSONDecodeError):
                return []

        _wait_for(lambda: round2("candidate.evaluating"), 240, "round 2 to start evaluating")
        before = _count_rows(checkpoint, "candidates")
        (done,) = _wait_for(lambda: round2("candidate.evaluated"), 240, "a finished candidate")
        # Its result is saved as a pending write of the round's step: then pull the plug.
        _wait_for(lambda: _count_rows(checkpoint, "candidates") > before, 30, "the saved write")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    killed_events = len(events(run_dir))
    assert not round2_finished(run_dir, other=3 - done["index"])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "running"  # a kill -9 leaves no chance to record anything

    assert cli.main(["optimize", "--resume", run_dir.name, "--out", str(out)]) == 0
    after = events(run_dir)[killed_events:]
    evaluated_again = [
        e for e in after if e["event"] == "candidate.evaluating" and e.get("round") == 2
    ]
    assert [e["index"] for e in evaluated_again] == [3 - done["index"]]
    assert not [e for e in after if e["event"] == "plan"]  # round 2's plan was not redone
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "done" and sorted(statuses(run)) == [
        (1, "incorrect"),
        (2, "ok"),
        (2, "ok"),
    ]
    assert not fake_openai.unexpected


def round2_finished(run_dir: Path, other: int) -> bool:
    return any(
        e.get("round") == 2 and e.get("index") == other
        for e in events(run_dir, "candidate.evaluated")
    )


def test_chat_run_waits_for_the_person_between_rounds(tmp_path, fake_openai):
    """The chat CLI's path: optimize() returns at the person's turn and resumes with an answer."""
    from kernelwright.graph import optimize as run_optimize
    from kernelwright.run.config import RunConfig

    script(fake_openai, [reply(code(WRONG)), reply(code(GOOD))])
    config = RunConfig(
        out_dir=str(tmp_path / "runs"), chat=True, candidates=1, trials=1, fusion_seed=False
    )
    run = run_optimize(config, TASK)
    assert run["status"] == "waiting" and run["waiting_for"]["round"] == 1
    run = run_optimize(config, resume=run["run_id"], answer="fix the cubic coefficient")
    assert run["status"] == "waiting" and run["waiting_for"]["best"].startswith("round_02/cand_1")
    planner_prompts = [r.messages for r in fake_openai.chat_requests if "planner" in r.system]
    assert "fix the cubic coefficient" in planner_prompts[-1][1]["content"]
    run = run_optimize(config, resume=run["run_id"], answer="/quit")
    assert (run["status"], run["stop_reason"], run["best"]["round"]) == ("done", "user", 2)
