"""`kernelwright eval` and `kernelwright baseline`: judge one candidate, time one task."""

from __future__ import annotations

import argparse
import json
import sys

from .common import EXIT_NEGATIVE, EXIT_OK, UserError, first_line, read_file


def _eval_config(args: argparse.Namespace):
    from ..sandbox.config import EvalConfig

    fields = {"dtype": args.dtype, "shapes": dict(args.shape)}
    for name in ("trials", "precision", "timeout_s", "max_memory_gb"):
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    if getattr(args, "no_compile", False):
        fields["compile_baseline"] = False
    if getattr(args, "cuda_graphs", False):
        fields["cuda_graphs"] = True
    return EvalConfig(**fields)


def _load_task(path: str, shapes: list[tuple[str, int]]):
    from ..sandbox.task import TaskError, load_task

    read_file(path, "task")
    try:
        return load_task(path, dict(shapes))
    except TaskError as e:
        raise UserError(str(e)) from None


def _judged_task(args: argparse.Namespace):
    """(task, EvalConfig) as eval and baseline judge them: without CUDA the task is shrunk for
    the Triton interpreter, as optimize does, unless --shape set the sizes; one line says so."""
    from ..run.shrink import interpreter_sizes
    from ..sandbox.task import TaskError
    from .preflight import NO_GPU_NOTE, cuda_available

    task = _load_task(args.task, args.shape)
    config = _eval_config(args)
    if cuda_available():
        return task, config
    try:
        shapes, note = interpreter_sizes(task, dict(args.shape))
    except TaskError as e:
        raise UserError(f"{e}; set the sizes with --shape NAME=VALUE") from None
    if args.shape or not shapes:
        print(f"kernelwright: {NO_GPU_NOTE}", file=sys.stderr)
        return task, config
    print(f"kernelwright: {note}", file=sys.stderr)
    return task, config.replace(shapes=shapes)


def _ran_at(task, dtype: str, overrides: dict[str, int], precision: str | None) -> str:
    """'  ran at: fp32 (precision strict), batch_size=16, dim=4096 (task: batch_size=4096, ...)'."""
    sizes = {**task.constants, **overrides}
    text = ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "no size constants"
    if sizes != task.constants:
        text += (
            " (the task's own: "
            + ", ".join(f"{k}={v}" for k, v in sorted(task.constants.items()))
            + ")"
        )
    policy = f" (precision {precision})" if precision else ""
    return f"  ran at: {dtype}{policy}, {text}"


def _with_ran_at(report: str, line: str) -> str:
    head, _, rest = report.partition("\n")
    return "\n".join(part for part in (head, line, rest) if part)


def cmd_eval(args: argparse.Namespace) -> int:
    from ..sandbox import evaluate
    from ..sandbox.judge.summary import format_result

    source = read_file(args.candidate, "candidate")
    task, config = _judged_task(args)
    result = evaluate(task, source, config)
    if args.json:
        print(result.to_json(indent=2))
    else:
        overrides = result.shape_overrides or {**task.overrides, **config.shapes}
        ran = _ran_at(task, result.dtype, overrides, config.precision)
        print(_with_ran_at(format_result(result, task_name=task.name), ran))
    if result.environment.sandbox_note:
        print(f"kernelwright: {result.environment.sandbox_note}", file=sys.stderr)
    if result.fault == "task":
        raise UserError(f"task error: {first_line(result.message)}; fix the task file")
    if result.fault == "evaluator":
        print(
            f"kernelwright: internal evaluator error [{result.rule}]: kernelwright failed, not "
            "the candidate, so nothing was learned about it; try again, and report it if it "
            "persists",
            file=sys.stderr,
        )
    return EXIT_OK if result.ok else EXIT_NEGATIVE


def cmd_baseline(args: argparse.Namespace) -> int:
    from ..sandbox import baseline
    from ..sandbox.judge.summary import format_baseline

    task, config = _judged_task(args)
    result = baseline(task, config)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        overrides = result.shape_overrides or {**task.overrides, **config.shapes}
        ran = _ran_at(task, result.dtype, overrides, config.precision)
        print(_with_ran_at(format_baseline(result, task_name=task.name), ran))
    if result.task_error:
        raise UserError(f"task error: {first_line(result.message)}; fix the task file")
    return EXIT_OK if result.ok else EXIT_NEGATIVE
