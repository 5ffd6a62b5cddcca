"""The `kernelwright` command: help, one-line errors with their exit codes, the live view, and
optimize -> results store -> runs / report / export on a real offline run (CPU interpreter)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys

import pytest
import torch
from test_cli_support import TASKS, check_standalone, kw, offline_run

from kernelwright import cli
from kernelwright.commands.progress import RunProgress, live_listener, plain_listener
from kernelwright.run.config import RunConfig
from kernelwright.run.records import variant_of
from kernelwright.store import Store

COMMANDS = (
    "eval", "baseline", "optimize", "suite", "nightly", "chat", "runs", "report", "export",
    "promote", "revert", "history", "metrics",
)  # fmt: skip


def test_help_lists_every_command_with_one_line_each(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    text = cli.build_parser().format_help()
    listing = text.split("COMMAND\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[0] for line in listing] == list(COMMANDS)
    assert all(len(line.split(None, 1)) == 2 for line in listing)  # a name and its help line


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_llm_env(monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_MODEL", "KERNELWRIGHT_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


GELU = str(TASKS / "gelu.py")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["optimize", "missing.py"], "task 'missing.py' does not exist"),
        (["suite", "missing_dir"], "task 'missing_dir' does not exist"),
        (["nightly", "missing_dir"], "task 'missing_dir' does not exist"),
        (["chat", "missing.py"], "task 'missing.py' does not exist"),
        (["optimize", "--resume", "nope-1"], "no run 'nope-1' under runs"),
        (["chat", "--resume", "nope-1"], "no run 'nope-1' under runs"),
        (["report", "nope-1"], "no run 'nope-1' under runs"),
        (["export", "nope-1", "--to", "x.py"], "no run 'nope-1' under runs"),
        (["optimize", GELU, "--model", "gpt-4o"], "no API key for model gpt-4o"),
        (["report", "--db", "missing.db"], "no results store at missing.db"),
        (["optimize"], "optimize needs a TASK file, or --resume RUN_ID"),
        # A bad value is one line too, not the 16-line usage block above it.
        (["optimize", GELU, "--time-budget", "banana"], "'banana' is not a duration"),
        (["optimize", GELU, "--rounds", "0"], "--rounds: must be at least 1, got 0"),
        (["optimize", GELU, "--candidates", "-2"], "--candidates: must be at least 1, got -2"),
        (["optimize", GELU, "--roofline-target", "2"], "must be above 0 and at most 1"),
        (["suite", GELU, "--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["eval", GELU, GELU, "--trials", "0"], "--trials: must be at least 1, got 0"),
        (["optimize", GELU, "--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["optimize", GELU, "--dtype", "fp8"], "invalid choice: 'fp8'"),
        (["optimize", GELU, "--baseline", "cudnn"], "invalid choice: 'cudnn'"),
    ],
)
def test_errors_are_one_line_and_exit_2(args, said, no_llm_env):
    code, out, err = kw(*args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and said in err, err


def test_a_bad_value_from_the_environment_is_refused_by_its_name(no_llm_env, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELWRIGHT_ROUNDS", "0")
    code, out, err = kw("optimize", GELU, "--model", "offline")
    assert (code, out) == (2, "")
    assert err == "kernelwright: KERNELWRIGHT_ROUNDS must be at least 1, got 0\n"
    assert not (tmp_path / "runs").exists()  # refused before anything ran
    monkeypatch.setenv("KERNELWRIGHT_ROUNDS", "1")
    monkeypatch.setenv("KERNELWRIGHT_BASELINE", "cudnn")
    code, out, err = kw("optimize", GELU, "--model", "offline")
    assert (code, out) == (2, "")
    assert err == "kernelwright: KERNELWRIGHT_BASELINE must be one of fastest, eager, compile\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--context-window", "tester=8192"], "'tester' is not a role"),
        (["--max-output-tokens", "lots"], "'lots' is not a number of tokens"),
    ],
)
def test_token_flags_name_what_is_wrong(args, said, no_llm_env):
    code, _, err = kw("optimize", GELU, *args)
    assert code == 2 and said in err


def test_no_api_key_says_it_runs_offline_and_how_to_configure(no_llm_env):
    code, _, err = kw("optimize", GELU, "--model", "gpt-4o")
    assert code == 2
    assert "OPENAI_API_KEY" in err and "--model offline" in err and "runs offline" in err


def test_unreachable_endpoint_names_the_url(no_llm_env, monkeypatch):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    code, _, err = kw("optimize", GELU, "--model", "gpt-4o-mini")
    assert code == 2 and err.count("\n") == 1
    assert f"cannot reach the model endpoint {url}" in err and "--model offline" in err


def test_error_exit_code_and_single_line_in_a_subprocess(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    done = subprocess.run(
        [sys.executable, "-m", "kernelwright.cli", "export", "nope-1", "--to", "x.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr == "kernelwright: no run 'nope-1' under runs (expected runs/nope-1/run.json)\n"
    )


# -- the live view --------------------------------------------------------------------------------
EVENTS = [
    {"event": "run.start", "run_id": "gelu-1", "task_name": "gelu", "path": "runs/gelu-1"},
    {"event": "plan", "round": 2, "source": "llm", "summary": "fuse it", "ideas": 2},
    {"event": "llm.call", "agent": "coder", "prompt_tokens": 1000, "completion_tokens": 200,
     "cost_usd": 0.0125},
    {"event": "candidate.evaluating", "round": 2, "index": 1, "origin": "llm"},
    {"event": "candidate.evaluating", "round": 2, "index": 2, "origin": "fusion"},
    {"event": "candidate.evaluated", "round": 2, "index": 1, "status": "ok",
     "summary": "ok, 1.50x vs eager", "speedup_eager": 1.5, "cached": False},
    {"event": "candidate.evaluated", "round": 2, "index": 2, "status": "incorrect",
     "summary": "incorrect [mismatch]: 3 elements differ", "cached": True},
    {"event": "critique", "round": 2, "source": "llm", "summary": "one ok", "verdict": "continue"},
]  # fmt: skip


def test_progress_model_tracks_round_candidates_best_tokens_and_cost():
    progress = RunProgress()
    for e in EVENTS[:5]:
        progress.update(e)
    assert progress.candidates[(2, 1)].status == "evaluating"
    for e in EVENTS[5:]:
        progress.update(e)
    assert (progress.round, progress.best_speedup, progress.tokens) == (2, 1.5, 1200)
    assert progress.status_line() == (
        "round 2: 1 incorrect, 1 ok | best so far: 1.50x vs eager | 1200 tokens, $0.0125"
    )
    from rich.console import Console

    screen = io.StringIO()
    Console(file=screen, width=140, color_system=None).print(progress.table())
    drawn = screen.getvalue()
    # Verdicts with brackets stay text (rich would read "[mismatch]" as a markup tag).
    assert "incorrect [mismatch]: 3 elements differ" in drawn and "incorrect (cached)" in drawn


def test_live_view_on_a_terminal_draws_the_table():
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=140, color_system=None)
    with live_listener(console) as show:
        for e in EVENTS:
            show(e)
    drawn = screen.getvalue()
    assert "gelu  ·  round 2  ·  gelu-1" in drawn
    for text in (
        "ok, 1.50x vs eager",
        "incorrect (cached)",
        "incorrect [mismatch]: 3 elements differ",  # brackets are text, not rich markup
        "best so far: 1.50x vs eager",
    ):
        assert text in drawn
    assert "LLM: 1 calls, 1200 tokens, $0.0125" in drawn


def test_plain_view_prints_steps_and_a_status_line_per_round():
    out = io.StringIO()
    show = plain_listener(out)
    for e in EVENTS:
        show(e)
    lines = out.getvalue().splitlines()
    assert "round 2 cand 2: incorrect [mismatch]: 3 elements differ (verdict from" in lines[3]
    assert lines[-1].startswith("round 2: 1 incorrect, 1 ok | best so far: 1.50x")


# -- optimize -> store -> runs, report, export ----------------------------------------------------
@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """One real offline run (fusion codegen, interpreter), and a second identical one."""
    if torch.cuda.is_available():  # on a GPU a kernel slower than eager is no winner
        pytest.skip("interpreter semantics: the first verified kernel is the run's best")
    root = tmp_path_factory.mktemp("cli")
    first = offline_run(root / "runs", root / "k.db")
    second = offline_run(root / "runs", root / "k.db")
    return root, first, second


@pytest.mark.slow
def test_optimize_records_the_run_and_reuses_verdicts_from_the_store(offline):
    root, first, second = offline
    assert first["status"] == "done" and first["best"] is not None
    store = Store(root / "k.db")
    row = store.run(first["run_id"])
    assert (row.status, row.stop_reason, row.task_name) == ("done", "exhausted", "gelu")
    (cand,) = store.candidates(first["run_id"])
    assert (cand.status, cand.cached) == ("ok", False)
    # The identical candidate of the second run came from the cache, not the evaluator.
    (again,) = store.candidates(second["run_id"])
    assert again.cached and again.source_hash == cand.source_hash
    evaluated = [
        json.loads(line)
        for line in (second["dir"] / "events.jsonl").read_text().splitlines()
        if '"candidate.evaluated"' in line
    ]
    assert [e["cached"] for e in evaluated] == [True]
    variant = variant_of(RunConfig.from_dict(first["config"]))
    best = store.best_kernel(cand.task_hash, cand.env_key, variant)
    assert best is not None and best.source == (first["dir"] / "best.py").read_text()
    # The second run's kernel is the first's (a cache hit): one kernel, one origin (issue 25).
    assert best.run_id == first["run_id"] == store.kernel_versions()[0].run_id


def test_runs_lists_id_task_date_best_and_stop_reason(offline):
    root, first, second = offline
    code, out, _ = kw("runs", "--out", root / "runs", "--db", root / "k.db")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "run",
        "task",
        "date",
        "status",
        "best",
        "stop",
        "reason",
    ]
    assert [line.split()[0] for line in lines[1:]] == [second["run_id"], first["run_id"]]
    assert lines[1].split()[1:] == ["gelu", second["created"][:19], "done", "verified", "exhausted"]


def test_runs_falls_back_to_the_run_directories(offline, tmp_path):
    root, first, _ = offline
    code, out, _ = kw("runs", "--out", root / "runs", "--db", tmp_path / "absent.db")
    assert code == 0 and first["run_id"] in out


def test_report_of_a_run_and_of_the_store(offline, tmp_path):
    root, first, second = offline
    (first["dir"] / "report.md").unlink()
    code, out, _ = kw("report", first["run_id"], "--out", root / "runs")
    assert code == 0 and (first["dir"] / "report.md").is_file()
    assert out.startswith(f"# kernelwright run {first['run_id']}: gelu")
    code, out, _ = kw("report", "--db", root / "k.db", "--to", tmp_path / "store")
    assert code == 0 and "best kernels in" in out
    (row,) = [line for line in out.splitlines() if line.startswith("gelu")]
    # The second run found the same kernel again: its origin stays the first run, as history's v1.
    assert "cpu (interpreter)" in row and first["run_id"] in row and second["run_id"] not in row
    code, out, _ = kw("history", "gelu", "--db", root / "k.db")
    assert code == 0 and first["run_id"] in out and second["run_id"] not in out
    summary = json.loads((tmp_path / "store" / "suite.json").read_text())["summary"]
    assert (summary["tasks"], summary["correct"]) == (1, 1)


@pytest.mark.slow
def test_export_of_a_real_run_is_standalone(offline, tmp_path):
    root, first, _ = offline
    target = tmp_path / "gelu_kernel.py"
    code, out, _ = kw("export", first["run_id"], "--out", root / "runs", "--to", target)
    assert code == 0 and f"wrote {target}" in out
    check_standalone(target, TASKS / "gelu.py", first["sizes"], tmp_path)


def test_store_path_defaults_inside_the_runs_directory(monkeypatch, tmp_path):
    from kernelwright.run.records import default_db_path

    monkeypatch.delenv("KERNELWRIGHT_DB", raising=False)
    # Inside: two out directories with one parent do not share a store unless asked (--db).
    assert default_db_path(tmp_path / "runs") == str(tmp_path / "runs" / "kernelwright.db")
    assert default_db_path(tmp_path / "other") != default_db_path(tmp_path / "runs")
    monkeypatch.setenv("KERNELWRIGHT_DB", str(tmp_path / "elsewhere.db"))
    assert default_db_path(tmp_path / "runs") == str(tmp_path / "elsewhere.db")


def test_max_memory_reaches_the_evaluator_and_refuses_nonsense(no_llm_env, monkeypatch):
    from kernelwright.run.config import eval_config_for, resolve_config

    seen = {}

    class Judged(Exception):
        pass

    def evaluate(task, source, config):
        seen["config"] = config
        raise Judged

    monkeypatch.setattr("kernelwright.sandbox.evaluate", evaluate)
    with pytest.raises(Judged):
        cli.main(["eval", GELU, GELU, "--max-memory", "12.5"])
    assert seen["config"].max_memory_gb == 12.5
    code, _, err = kw("eval", GELU, GELU, "--max-memory", "-1")
    assert code == 2 and "--max-memory: must be above 0" in err
    config, _ = resolve_config({"max_memory_gb": 3.0}, {})
    assert eval_config_for(config).max_memory_gb == 3.0
