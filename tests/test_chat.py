"""`kernelwright chat`: scripted lines against the fake OpenAI server (revise, /diff, /undo,
/save, /quit), a chat left at the prompt and resumed later starting from a --from kernel, and the
offline path with /bench through the real evaluator."""

from __future__ import annotations

import json

import pytest
import torch
from fake_openai import reply
from test_cli_support import EXAMPLES, TASKS, kw

from kernelwright.run.rundir import BEST_PY_HEADER
from kernelwright.store import Store

pytest_plugins = ["fake_openai"]
# Interpreter semantics: the graph's best is the first verified kernel.
pytestmark = [
    pytest.mark.skipif(torch.cuda.is_available(), reason="CPU (interpreter) semantics"),
    pytest.mark.slow,
]

GELU = TASKS / "gelu.py"
GOOD = (EXAMPLES / "gelu.py").read_text()
SMALL = GOOD.replace("BLOCK_SIZE = 1024  #", "BLOCK_SIZE = 512  #")
MINE = GOOD.replace("BLOCK_SIZE = 1024  #", "BLOCK_SIZE = 256  #")
PLAN = {"summary": "as asked", "ideas": [{"title": "revise", "approach": "what the person said"}]}
CRITIQUE = {
    "summary": "the kernel is verified",
    "feedback": [{"candidate": 1, "problem": "correctness only here", "fix": "time it on a GPU"}],
    "verdict": "continue",
    "reason": "the person decides",
}
CHEAP = ["--trials", "1", "--no-fusion-seed", "--workers", "1"]


@pytest.fixture(autouse=True)
def _patient_client(request, monkeypatch):
    """No test here is about timeouts: the fixture's 1 s client timeout fired on a loaded CI
    machine, the retry asked the server again, and the scripted replies ran out (seen twice)."""
    if "fake_openai" in request.fixturenames:
        request.getfixturevalue("fake_openai")
        monkeypatch.setenv("KERNELWRIGHT_TIMEOUT_S", "60")


def code(source: str) -> str:
    return f"Revised.\n```python\n{source}```\n"


def script(fake, *sources: str) -> None:
    fake.route("You are the planner", [reply(json.dumps(PLAN), times=None)])
    fake.route("You are the coder", [reply(code(s)) for s in sources])
    fake.route("You are the critic", [reply(json.dumps(CRITIQUE), times=None)])


def coder_prompts(fake) -> list[str]:
    return [r.messages[1]["content"] for r in fake.chat_requests if "You are the coder" in r.system]


def only_run(runs) -> dict:
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return {**json.loads((run_dir / "run.json").read_text()), "dir": run_dir}


def test_revise_diff_undo_save_and_quit(tmp_path, fake_openai):
    script(fake_openai, GOOD, SMALL)
    runs, saved = tmp_path / "runs", tmp_path / "saved.py"
    lines = ["/help", "/diff", "use 512-wide blocks", "/diff", "/undo", f"/save {saved}"]
    lines += ["/bogus", "/quit"]
    args = ["chat", GELU, "--out", runs, "--db", tmp_path / "k.db", *CHEAP]
    code_, out, err = kw(*args, stdin="\n".join(lines) + "\n")
    assert code_ == 0, out + err
    assert "/undo          back to the previous version" in out  # /help
    assert "only one version so far: nothing to diff" in out
    assert "critic: the kernel is verified" in out
    assert "  - cand 1: correctness only here -> time it on a GPU" in out
    diff = out[out.index("--- round_01/cand_1") :]
    assert diff.startswith("--- round_01/cand_1\n+++ round_02/cand_1\n")
    assert "\n-BLOCK_SIZE = 1024  #" in diff and "\n+BLOCK_SIZE = 512  #" in diff
    assert "undid round_02/cand_1; current kernel: round_01/cand_1" in out
    assert saved.read_text() == GOOD.strip() + "\n"
    assert "unknown command /bogus: /help lists them" in out
    assert "use 512-wide blocks" in coder_prompts(fake_openai)[1]
    run = only_run(runs)
    assert (run["status"], run["stop_reason"]) == ("done", "user")
    assert f"run directory: {run['dir']}" in out and (run["dir"] / "best.py").is_file()
    assert Store(tmp_path / "k.db").run(run["run_id"]).status == "done"
    assert not fake_openai.unexpected


def test_leave_then_resume_starting_from_a_given_kernel(tmp_path, fake_openai):
    script(fake_openai, GOOD, SMALL)
    runs, mine = tmp_path / "runs", tmp_path / "mine.py"
    mine.write_text(MINE)
    where = ["--out", runs, "--db", tmp_path / "k.db"]
    code_, out, err = kw("chat", GELU, "--from", mine, *where, *CHEAP, stdin="")
    assert code_ == 0, out + err
    run = only_run(runs)
    assert run["status"] == "waiting"
    # Round 1 already revises the person's kernel.
    first = coder_prompts(fake_openai)[0]
    assert "Start from the person's kernel" in first and "BLOCK_SIZE = 256  #" in first
    assert f"current kernel: from (from {mine})" in out
    assert out.rstrip().endswith(
        f"left the chat; resume it with: kernelwright chat --resume {run['run_id']}"
    )

    later = "make it faster\n/diff\n/quit\n"
    code_, out, err = kw("chat", "--resume", run["run_id"], *where, stdin=later)
    assert code_ == 0, out + err
    # The person's kernel, not the graph's best (round 1's), is what the coder was given.
    prompt = coder_prompts(fake_openai)[1]
    assert "make it faster" in prompt and "Start from this version of the kernel (from:" in prompt
    assert "BLOCK_SIZE = 256  #" in prompt
    assert "--- from\n+++ round_02/cand_1\n" in out and "\n-BLOCK_SIZE = 256  #" in out
    assert only_run(runs)["status"] == "done"
    assert not fake_openai.unexpected


def test_offline_chat_benches_and_saves_the_current_kernel(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    runs, saved = tmp_path / "runs", tmp_path / "k.py"
    args = ["chat", GELU, "--model", "offline", "--out", runs, "--db", tmp_path / "k.db"]
    code_, out, err = kw(
        *args, "--trials", "1", "--workers", "1", stdin=f"/bench\n/save {saved}\n/quit\n"
    )
    assert code_ == 0, out + err
    run = only_run(runs)
    assert "round_01/cand_1:\ngelu: OK" in out and "times: not meaningful" in out
    assert (run["dir"] / "best.py").read_text() == BEST_PY_HEADER + saved.read_text()
    assert run["status"] == "done" and run["stop_reason"] == "user"


def test_the_best_so_far_line_counts_earlier_rounds(tmp_path, fake_openai):
    """Each turn resumes the run: its status line said "best so far: none yet" after round 1
    had verified a kernel."""
    wrong = GOOD.replace("0.044715", "0.07")
    script(fake_openai, GOOD, wrong)
    args = ["chat", GELU, "--out", tmp_path / "runs", "--db", tmp_path / "k.db", *CHEAP]
    code_, out, err = kw(*args, stdin="try another formula\n/quit\n")
    assert code_ == 0, out + err
    assert "round 1: 1 ok | best so far: 1 verified (no timings here)" in out
    assert "round 2: 1 incorrect | best so far: 1 verified (no timings here)" in out
    assert "none yet" not in out


def _offline(monkeypatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_offline_a_request_in_words_is_answered_with_what_works_offline(tmp_path, monkeypatch):
    _offline(monkeypatch)
    runs = tmp_path / "runs"
    args = ["chat", GELU, "--model", "offline", "--out", runs, "--db", tmp_path / "k.db"]
    code_, out, err = kw(*args, *CHEAP, stdin="use 512-wide blocks\n/quit\n")
    assert code_ == 0, out + err
    assert "No model is configured, so a request in words cannot be acted on" in out
    for offer in ("/bench", "# tune:", "--from", "kernelwright eval TASK PATH", "OPENAI_API_KEY"):
        assert offer in out
    # No round ran for the request: the offline coder would only have repeated round 1, and the
    # rules' critic blamed the person for it.
    run = only_run(runs)
    assert not (run["dir"] / "round_02").exists()
    assert "change the approach" not in out and "duplicate" not in out


def test_offline_from_judges_the_persons_kernel_in_round_one(tmp_path, monkeypatch):
    _offline(monkeypatch)
    runs, mine = tmp_path / "runs", tmp_path / "mine.py"
    mine.write_text(MINE)
    args = ["chat", GELU, "--model", "offline", "--from", mine, "--out", runs]
    code_, out, err = kw(*args, "--db", tmp_path / "k.db", *CHEAP, stdin="/diff\n/quit\n")
    assert code_ == 0, out + err
    run = only_run(runs)
    assert (run["dir"] / "round_01" / "cand_1" / "kernel.py").read_text() == MINE
    assert run["candidates"][0]["origin"] == "human" and run["best"]["candidate"] == 1
    assert "current kernel: round_01/cand_1 (ok" in out  # its verdict, not the unjudged file
    assert (run["dir"] / "best.py").read_text().endswith(MINE.rstrip() + "\n")


def test_offline_chat_says_no_model_once_at_its_start(tmp_path, monkeypatch):
    # issue 25: every turn resumed the run and said it again; a resumed chat said it only
    # after the person's first message (/quit).
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    runs = tmp_path / "runs"
    where = ["--model", "offline", "--out", runs, "--db", tmp_path / "k.db", *CHEAP]
    code_, out, err = kw("chat", GELU, *where, stdin="")
    assert code_ == 0, out + err
    assert out.count("no model configured") == 1
    assert out.index("no model configured") < out.index("your turn")
    run = only_run(runs)
    code_, out, err = kw("chat", "--resume", run["run_id"], *where[2:], stdin="/quit\n")
    assert code_ == 0, out + err
    assert out.count("no model configured") == 1  # not again when /quit resumes the run
    assert out.index("no model configured") < out.index("your turn")
