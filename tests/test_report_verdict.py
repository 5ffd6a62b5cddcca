"""The verdict paragraph (report/verdict.py): what a run judged at, a winner, no win, a task
error, evaluator errors, an unknown speed, a silent model, torch.compile beating every kernel."""

from __future__ import annotations

from kernelwright.report.verdict import judged_text, verdict

# -- the verdict ----------------------------------------------------------------------------------

RUN = {
    "task_name": "gelu",
    "config": {"dtype": "fp32", "precision": "strict"},
    "sizes": {"N": 4096},
    "task_sizes": {"N": 4096},
    "sized_by": "task",
    "rounds": [{}, {}],
    "stop_reason": "patience",
    "candidates": [
        {"round": 1, "candidate": 1, "status": "ok", "speedup_eager": 0.8},
        {"round": 2, "candidate": 1, "status": "incorrect", "rule": "mismatch"},
    ],
}


def test_judged_text_tells_why_the_sizes_differ():
    assert judged_text(RUN) == "fp32, precision strict, at N=4096 (the task's own sizes)"
    shrunk = {**RUN, "sizes": {"N": 64}, "sized_by": "shrink"}
    assert judged_text(shrunk, {"N": 55}) == (
        "fp32, precision strict, at N=64: shrunk for the Triton interpreter (no CUDA) from the "
        "task's N=4096; also checked at N=55"
    )


def test_verdict_of_run_json_without_a_best_names_the_fastest_as_no_win():
    text = verdict(RUN)
    assert text.startswith("No win: the best verified kernel (round 1, candidate 1) runs at 0.80x")
    assert "1 of 2 candidates over 2 rounds (1 ok, 1 incorrect) were correct" in text
    assert text.endswith("Judged in fp32, precision strict, at N=4096 (the task's own sizes).")


def test_verdict_of_a_winner_a_task_error_and_evaluator_errors():
    best = {"round": 1, "candidate": 1, "speedup_eager": 1.5, "speedup_compiled": 0.9}
    won = verdict({**RUN, "best": best})
    assert won.startswith("The best verified kernel (round 1, candidate 1) is 1.50x faster")
    assert "torch.compile is still faster" in won
    broken = {"status": "crashed", "rule": "worker-start"}
    errs = verdict({**RUN, "candidates": [*RUN["candidates"], broken, broken]})
    assert "2 evaluator errors (kernelwright's fault, not the candidate's: they were" in errs
    task = verdict({**RUN, "stop_reason": "task-error", "stop_detail": "it raises"})
    assert task == (
        "Task error: the task's reference itself fails, so no candidate could be judged "
        "(it raises)."
    )
    unknown = verdict({**RUN, "best": {"round": 1, "candidate": 1, "speedup_eager": None}})
    assert "its speed is unknown" in unknown
    silent = verdict({**RUN, "llm_unanswered": {"coder": "401"}, "models": {"coder": "gpt-4o"}})
    assert silent.endswith("answered no call for coder (gpt-4o): those steps ran on the rules "
                           "and the fusion codegen. Last error: 401")  # fmt: skip


def test_verdict_says_to_use_torch_compile_when_it_beats_every_kernel():
    norm = {"round": 1, "candidate": 1, "status": "ok", "speedup_eager": 3.8,
            "speedup_compiled": 0.22}  # fmt: skip
    run = {**RUN, "config": {**RUN["config"], "baseline": "fastest"}, "candidates": [norm]}
    text = verdict(run)
    assert text.startswith(
        "No win: torch.compile is 4.55x faster than the best verified kernel (round 1, "
        "candidate 1, 3.80x PyTorch eager); use torch.compile."
    )
    eager_run = {**run, "config": {**run["config"], "baseline": "eager"}, "best": norm}
    won = verdict(eager_run)
    assert won.startswith("The best verified kernel (round 1, candidate 1) is 3.80x faster")
    assert "torch.compile is still faster" in won
