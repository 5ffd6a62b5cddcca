"""The `kernelwright` command: argument parsing and thin commands over the package."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Exit codes: 0 success, 1 the verdict was negative (candidate not ok, regression), 2 bad input.
EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2


class UserError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


def _shape(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--shape expects NAME=VALUE, got {text!r}")
    try:
        return name.strip(), int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape {name}: {value!r} is not an integer") from None


def _duration(text: str) -> float:
    from .agents.config import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_task_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dtype",
        choices=["fp32", "fp16", "bf16"],
        default="fp32",
        help="cast model and floating inputs (as KernelBench does)",
    )
    p.add_argument(
        "--shape",
        type=_shape,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a size constant of the task (repeatable)",
    )


def _eval_config(args: argparse.Namespace):
    from .sandbox.config import EvalConfig

    fields = {"dtype": args.dtype, "shapes": dict(args.shape)}
    for name in ("trials", "precision", "timeout_s"):
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    if getattr(args, "no_compile", False):
        fields["compile_baseline"] = False
    if getattr(args, "cuda_graphs", False):
        fields["cuda_graphs"] = True
    return EvalConfig(**fields)


def _read_file(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{what} {path!r} does not exist (or is not a file)")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {what} {path!r}: {e}") from None


def _load_task(path: str, shapes: list[tuple[str, int]]):
    from .sandbox.task import TaskError, load_task

    _read_file(path, "task")
    try:
        return load_task(path, dict(shapes))
    except TaskError as e:
        raise UserError(str(e)) from None


def cmd_eval(args: argparse.Namespace) -> int:
    from .sandbox import evaluate
    from .sandbox.summary import format_result

    task = _load_task(args.task, args.shape)
    source = _read_file(args.candidate, "candidate")
    config = _eval_config(args)
    result = evaluate(task, source, config)
    if args.json:
        print(result.to_json(indent=2))
    else:
        print(format_result(result, task_name=task.name))
    return EXIT_OK if result.ok else EXIT_NEGATIVE


def cmd_baseline(args: argparse.Namespace) -> int:
    from .sandbox import baseline
    from .sandbox.summary import format_baseline

    task = _load_task(args.task, args.shape)
    result = baseline(task, _eval_config(args))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        print(format_baseline(result, task_name=task.name))
    return EXIT_OK if result.ok else EXIT_NEGATIVE


def _progress_printer():
    """A listener printing one line per progress event (rich colours on a terminal)."""
    from .agents.rundir import format_event

    if sys.stdout.isatty():
        from rich.console import Console

        console = Console(highlight=False)
        styles = {"stop": "bold", "finalize": "bold green", "llm.fallback": "yellow"}

        def show(event: dict) -> None:
            line = format_event(event)
            if line:
                console.print(line, style=styles.get(event["event"], ""), markup=False)

        return show

    def show_plain(event: dict) -> None:
        line = format_event(event)
        if line:
            print(line, flush=True)

    return show_plain


def cmd_optimize(args: argparse.Namespace) -> int:
    from .agents.config import resolve_config
    from .agents.rundir import verdict
    from .graph import optimize
    from .sandbox.task import TaskError

    if not args.task and not args.resume:
        raise UserError("optimize needs a TASK file, or --resume RUN_ID to continue a run")
    flags = {
        "model": args.model,
        "planner_model": args.planner_model,
        "coder_model": args.coder_model,
        "critic_model": args.critic_model,
        "rounds": args.rounds,
        "candidates": args.candidates,
        "patience": args.patience,
        "margin": args.margin,
        "roofline_target": args.roofline_target,
        "budget_usd": args.budget_usd,
        "budget_tokens": args.budget_tokens,
        "time_budget_s": args.time_budget,
        "dtype": args.dtype,
        "shapes": dict(args.shape) or None,
        "precision": args.precision,
        "trials": args.trials,
        "workers": args.workers,
        "tune": False if args.no_tune else None,
        "fusion_seed": False if args.no_fusion_seed else None,
        "out_dir": args.out,
        "no_cache": True if args.no_cache else None,
    }
    try:
        config, _ = resolve_config(flags)
        run = optimize(config, args.task, resume=args.resume, listeners=[_progress_printer()])
    except (TaskError, ValueError) as e:
        raise UserError(str(e)) from None
    print(f"run directory: {Path(config.out_dir) / run['run_id']}")
    print(verdict(run))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelwright",
        description="Turn PyTorch programs into fast, verified Triton kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "eval",
        help="judge one candidate file against a task: correctness, "
        "anti-cheat checks, times and roofline",
    )
    p.add_argument("task", help="KernelBench-format task file (Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="candidate file defining ModelNew")
    _add_task_options(p)
    p.add_argument("--trials", type=int, default=None, help="correctness trials (default 3)")
    p.add_argument(
        "--precision",
        choices=["strict", "tf32-ok"],
        default=None,
        help="strict (default): fp32 must be fp32-accurate; tf32-ok accepts TF32",
    )
    p.add_argument(
        "--timeout",
        dest="timeout_s",
        type=float,
        default=None,
        help="wall-clock seconds for the candidate (default 180)",
    )
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--cuda-graphs", action="store_true", help="time CUDA-graph replays")
    p.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("baseline", help="time a task: PyTorch eager, torch.compile and roofline")
    p.add_argument("task")
    _add_task_options(p)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_baseline)

    p = sub.add_parser(
        "optimize",
        help="search for a faster verified Triton kernel for a task with the agent loop",
    )
    p.add_argument("task", nargs="?", help="KernelBench-format task file (omit with --resume)")
    p.add_argument("--model", help="model of every agent; 'offline' = rules + fusion codegen")
    p.add_argument("--planner-model", help="the planner's model (default: --model)")
    p.add_argument("--coder-model", help="the coder's model (default: --model)")
    p.add_argument("--critic-model", help="the critic's model (default: --model)")
    p.add_argument("--rounds", type=int, help="at most this many rounds (default 5)")
    p.add_argument("--candidates", type=int, help="candidates per round (default 3)")
    p.add_argument(
        "--patience",
        type=int,
        help="stop after this many rounds without a better kernel (default 2)",
    )
    p.add_argument(
        "--margin", type=float, help="relative gain that counts as better (default 0.02)"
    )
    p.add_argument(
        "--roofline-target", type=float, help="stop at this fraction of the roofline (default 0.9)"
    )
    p.add_argument("--budget-usd", type=float, help="stop once LLM calls cost this much")
    p.add_argument("--budget-tokens", type=int, help="stop once LLM calls used this many tokens")
    p.add_argument(
        "--time-budget",
        type=_duration,
        metavar="DURATION",
        help="stop after this much work, e.g. 30m or 1h30m",
    )
    p.add_argument(
        "--dtype",
        choices=["fp32", "fp16", "bf16"],
        default=None,
        help="cast model and floating inputs (default fp32)",
    )
    p.add_argument(
        "--shape",
        type=_shape,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a size constant of the task (repeatable)",
    )
    p.add_argument("--precision", choices=["strict", "tf32-ok"], default=None)
    p.add_argument("--trials", type=int, help="correctness trials per candidate (default 3)")
    p.add_argument("--workers", type=int, help="evaluator worker processes")
    p.add_argument("--no-tune", action="store_true", help="skip the `# tune:` constant sweep")
    p.add_argument(
        "--no-fusion-seed",
        action="store_true",
        help="do not add the fusion codegen's kernel to round 1",
    )
    p.add_argument("--out", help="directory of run directories (default ./runs)")
    p.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="continue a run (under --out) from its last completed step, with its own settings",
    )
    p.add_argument("--no-cache", action="store_true", help="do not replay cached LLM replies")
    p.set_defaults(func=cmd_optimize)

    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UserError as e:
        print(f"kernelwright: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kernelwright: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
