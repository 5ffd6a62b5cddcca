"""The `kernelwright` command: argument parsing, and dispatch to the commands in commands/."""

from __future__ import annotations

import argparse
import importlib
import math
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from . import knobs
from .cluster import EXECUTORS
from .commands.common import EXIT_BROKEN_PIPE, EXIT_FOR_FAULT, EXIT_USAGE, UserError
from .decisions import BASELINES
from .errors import KernelwrightError
from .sandbox.contract import DTYPE_NAMES, PRECISION_POLICIES


class _Parser(argparse.ArgumentParser):
    """argparse that answers a bad argument with one line, what was wrong and where the options
    are listed, instead of the usage block (16 lines for optimize) above the one that matters."""

    def error(self, message: str):  # type: ignore[override]
        raise UserError(f"{message} (`{self.prog} --help` lists the options)")


def _at_least(minimum: int):
    """An argparse type: an integer no smaller than `minimum` (--rounds 0 would still run one)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _number(low: float, high: float | None = None, *, low_open: bool = False):
    """An argparse type: a finite float in [low, high] (low excluded when `low_open`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        below = value <= low if low_open else value < low
        if not math.isfinite(value) or below or (high is not None and value > high):
            bound = f"above {low:g}" if low_open else f"at least {low:g}"
            bound += f" and at most {high:g}" if high is not None else ""
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    return parse


_COUNT = _at_least(1)


def _shape(text: str) -> tuple[str, int | tuple[int, ...]]:
    from .sandbox.task import parse_size

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--shape expects NAME=VALUE, got {text!r}")
    try:
        return name.strip(), parse_size(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shape {name}: {value!r} is not an integer or a tuple of integers (3,5)"
        ) from None


def _add_max_memory(p: argparse.ArgumentParser) -> None:
    """--max-memory GB, for eval and the search commands alike."""
    p.add_argument(
        "--max-memory", dest="max_memory_gb", default=None, metavar="GB", **_knob("max_memory_gb")
    )


def _duration(text: str) -> float:
    from .knobs import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _budget(text: str) -> float:
    """A time budget: a duration above zero (a budget of 0 would stop before the first round)."""
    seconds = _duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be longer than 0 s, got {text!r}")
    return seconds


def _role_tokens(text: str) -> tuple[str | None, int]:
    """`8192` (every role) or `coder=8192` (one role) for --context-window/--max-output-tokens."""
    from .run.config import ROLES

    role, sep, value = text.rpartition("=")
    if sep and role.strip() not in ROLES:
        raise argparse.ArgumentTypeError(
            f"{role.strip()!r} is not a role; expected TOKENS or ROLE=TOKENS with ROLE one of "
            f"{', '.join(ROLES)}"
        )
    try:
        tokens = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of tokens") from None
    if tokens <= 0:
        raise argparse.ArgumentTypeError(f"{tokens} tokens: expected a positive number")
    return (role.strip() or None), tokens


def _night(text: str) -> str:
    import datetime as dt

    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"--night expects YYYY-MM-DD, got {text!r}") from None


def _add_task_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        default="fp32",
        help="cast model and floating inputs (as KernelBench does)",
    )
    p.add_argument(
        "--shape",
        type=_shape,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a size constant of the task (repeatable; a tuple as NAME=3,5)",
    )


# -- the search commands (optimize, suite, nightly, chat) ---------------------------------------


def _knob(field: str) -> dict[str, Any]:
    """help and type of a RunConfig field's option, from the registry (knobs.py): the help with
    its default, and the registry's limits (an integer of at least its minimum, a float in its
    range)."""
    knob = knobs.for_field(field)
    option: dict[str, Any] = {"help": knob.describe()}
    if knob.type == "int" and knob.minimum is not None:
        option["type"] = _at_least(int(knob.minimum))
    elif knob.type == "float" and (knob.minimum is not None or knob.positive):
        low = knob.minimum if knob.minimum is not None else 0.0
        option["type"] = _number(low, knob.maximum, low_open=knob.positive)
    return option


def _add_search_options(p: argparse.ArgumentParser, *, budget_alias: bool = False) -> None:
    """The options every command that runs the agent loop shares; their help, defaults and
    limits are the registry's (knobs.py)."""
    for role in ("", "planner_", "coder_", "critic_"):
        p.add_argument(f"--{role.replace('_', '-')}model", **_knob(f"{role}model"))
    for field in ("rounds", "candidates", "patience", "margin", "roofline_target"):
        p.add_argument(knobs.for_field(field).flag, **_knob(field))
    p.add_argument("--budget-usd", **_knob("budget_usd"))
    p.add_argument("--budget-tokens", **_knob("budget_tokens"))
    names = ["--time-budget", "--budget"] if budget_alias else ["--time-budget"]
    p.add_argument(
        *names,
        dest="time_budget",
        type=_budget,
        metavar="DURATION",
        help=knobs.for_field("time_budget_s").describe(),
    )
    p.add_argument("--dtype", choices=DTYPE_NAMES, default=None, **_knob("dtype"))
    p.add_argument(
        "--shape",
        type=_shape,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a size constant of the task (repeatable; a tuple as NAME=3,5)",
    )
    p.add_argument("--precision", choices=PRECISION_POLICIES, default=None)
    p.add_argument("--baseline", choices=BASELINES, default=None, **_knob("baseline"))
    p.add_argument("--trials", **_knob("trials"))
    _add_max_memory(p)
    p.add_argument("--workers", **_knob("workers"))
    p.add_argument("--executor", choices=EXECUTORS, default=None, **_knob("executor"))
    p.add_argument("--ray-address", metavar="ADDR", **_knob("ray_address"))
    p.add_argument("--max-retries", default=None, metavar="N", **_knob("max_retries"))
    p.add_argument("--no-tune", action="store_true", help="skip the `# tune:` constant sweep")
    p.add_argument(
        "--no-fusion-seed",
        action="store_true",
        help="do not add the fusion codegen's kernel to round 1",
    )
    p.add_argument("--no-cache", action="store_true", **_knob("no_cache"))
    p.add_argument(
        "--context-window",
        type=_role_tokens,
        action="append",
        metavar="[ROLE=]TOKENS",
        help=knobs.for_field("context_window").describe() + "; ROLE=TOKENS sets one role's "
        "(planner, coder, critic); repeatable; env KERNELWRIGHT_[ROLE_]CONTEXT_WINDOW",
    )
    p.add_argument(
        "--max-output-tokens",
        type=_role_tokens,
        action="append",
        metavar="[ROLE=]TOKENS",
        help=knobs.for_field("max_output_tokens").describe() + "; ROLE=TOKENS sets one role's; "
        "repeatable; env KERNELWRIGHT_[ROLE_]MAX_OUTPUT_TOKENS",
    )
    p.add_argument("--fallback-offline", action="store_true", **_knob("fallback_offline"))
    _add_place_options(p)


def _add_place_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, **_knob("out_dir"))
    p.add_argument("--db", metavar="PATH", **_knob("db"))


def _add_version_selectors(p: argparse.ArgumentParser) -> None:
    """--env and --variant: which of a task's kernels, where it has several."""
    p.add_argument(
        "--env",
        metavar="TEXT",
        help="the environment: its key or a part of it ('H100', 'torch 2.11'), where the task "
        "has kernels on several",
    )
    p.add_argument(
        "--variant", metavar="VARIANT", help="the variant ('fp32', 'fp16 N=4096'), where several"
    )


def _command(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The command `name` of commands/<module>.py, imported only when it runs: the commands load
    torch and the graph, which `kernelwright --help` or a bad flag must not wait for."""

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"{__package__}.commands.{module}"), name)(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernelwright",
        description="Turn PyTorch programs into fast, verified Triton kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("eval", help="judge one candidate kernel: correctness, checks, times")
    p.add_argument("task", help="KernelBench-format task file (Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="candidate file defining ModelNew")
    _add_task_options(p)
    p.add_argument("--trials", type=_COUNT, default=None, help="correctness trials (default 3)")
    p.add_argument(
        "--precision",
        choices=PRECISION_POLICIES,
        default=None,
        help="strict (default): fp32 must be fp32-accurate; tf32-ok accepts TF32",
    )
    p.add_argument(
        "--timeout",
        dest="timeout_s",
        type=_number(0.0, low_open=True),
        default=None,
        help="wall-clock seconds for the candidate (default 180)",
    )
    _add_max_memory(p)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--cuda-graphs", action="store_true", help="time CUDA-graph replays")
    p.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    p.set_defaults(func=_command("evaluate", "cmd_eval"))

    p = sub.add_parser("baseline", help="time a task: PyTorch eager, torch.compile and roofline")
    p.add_argument("task")
    _add_task_options(p)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_command("evaluate", "cmd_baseline"))

    p = sub.add_parser("optimize", help="search for a faster verified kernel for one task")
    p.add_argument("task", nargs="?", help="KernelBench-format task file (omit with --resume)")
    _add_search_options(p)
    p.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="continue a run (under --out) from its last completed step, with its own settings",
    )
    p.set_defaults(func=_command("optimize", "cmd_optimize"))

    p = sub.add_parser("suite", help="optimize many tasks; KernelBench metrics at the end")
    p.add_argument("tasks", nargs="+", metavar="DIR|TASK", help="task files or directories")
    p.add_argument(
        "--jobs",
        type=_COUNT,
        default=1,
        help="tasks optimized at once (default 1); on GPUs at most one job per GPU",
    )
    p.add_argument(
        "--stop-after",
        type=_duration,
        metavar="DURATION",
        help="start no task after this long (e.g. 50m): a window for cron; a rerun continues",
    )
    p.add_argument(
        "--redo",
        action="append",
        default=[],
        metavar="TASK",
        help="run this task again though an earlier suite in --out finished it, replacing its "
        "row: a label as the suite prints it (level1/36_cumsum_rows) or a glob ('level2/*'); "
        "repeatable",
    )
    _add_search_options(p)
    p.set_defaults(func=_command("suite", "cmd_suite"))

    p = sub.add_parser("nightly", help="re-verify and re-time best kernels; fail on regression")
    p.add_argument("suite", nargs="+", metavar="SUITE", help="task files or directories")
    p.add_argument(
        "--slowdown",
        type=_number(0.0),
        default=None,
        help="a kernel this much slower than the night before is a regression (default 0.10)",
    )
    p.add_argument("--no-search", action="store_true", help="only re-verify; never search again")
    p.add_argument(
        "--revert-on-regression",
        action="store_true",
        help="when a task's current kernel regressed, make its previous version current again "
        "(verified tonight) and say so in the report",
    )
    p.add_argument("--night", type=_night, help="the night's date, YYYY-MM-DD (default today)")
    p.add_argument(
        "--report", metavar="DIR", help="report directory (default: nightly/NIGHT beside the store)"
    )
    _add_search_options(p, budget_alias=True)
    p.set_defaults(func=_command("nightly", "cmd_nightly"))

    p = sub.add_parser("chat", help="refine one kernel interactively, round by round")
    p.add_argument("task", nargs="?", help="KernelBench-format task file (omit with --resume)")
    p.add_argument(
        "--from",
        dest="start_from",
        metavar="RUN|KERNEL",
        help="start from a run's best kernel or a kernel file",
    )
    p.add_argument("--resume", metavar="RUN_ID", help="continue a chat left earlier")
    _add_search_options(p)
    p.set_defaults(func=_command("chat", "cmd_chat"))

    p = sub.add_parser("runs", help="list runs: task, date, best speedup, stop reason")
    p.add_argument("--limit", type=_COUNT, default=50, help="at most this many, newest first")
    _add_place_options(p)
    p.set_defaults(func=_command("runs", "cmd_runs"), out="runs")

    p = sub.add_parser("report", help="write and print a run's report, or the store's best")
    p.add_argument("run", nargs="?", metavar="RUN", help="run id (under --out) or run directory")
    p.add_argument("--to", metavar="DIR", help="with --db: also write the report files here")
    _add_place_options(p)
    p.set_defaults(func=_command("runs", "cmd_report"), out="runs")

    p = sub.add_parser(
        "export", help="write a run's winning kernel, or a task's current version, as a module"
    )
    p.add_argument(
        "run",
        metavar="RUN|TASK",
        help="run id (under --out) or run directory; else a task of the store: its current version",
    )
    p.add_argument("--to", required=True, metavar="FILE.py", help="the module to write")
    p.add_argument(
        "--guard",
        action="store_true",
        help="wrap it in the runtime guard (kernelwright.runtime): shadow checks against the "
        "task's Model, fallback, the verified shapes and dtype written in",
    )
    _add_place_options(p)
    _add_version_selectors(p)
    p.set_defaults(func=_command("export", "cmd_export"), out="runs")

    p = sub.add_parser("promote", help="make a run's best verified kernel its task's current one")
    p.add_argument("run", metavar="RUN", help="run id (under --out) or run directory")
    _add_place_options(p)
    p.set_defaults(func=_command("versions", "cmd_promote"), out="runs")

    p = sub.add_parser("revert", help="make a task's previous kernel version current again")
    p.add_argument("task", metavar="TASK", help="task name, task file, or task hash prefix")
    p.add_argument("--reason", help="why, kept with the version taken back")
    _add_place_options(p)
    _add_version_selectors(p)
    p.set_defaults(func=_command("versions", "cmd_revert"), out="runs")

    p = sub.add_parser("history", help="list a task's kernel versions: verdicts, speedups, runs")
    p.add_argument("task", metavar="TASK", help="task name, task file, or task hash prefix")
    p.add_argument("--json", action="store_true", help="print the versions as JSON")
    _add_place_options(p)
    _add_version_selectors(p)
    p.set_defaults(func=_command("versions", "cmd_history"), out="runs")

    p = sub.add_parser("metrics", help="write the store's tables as CSV or Parquet for dashboards")
    p.add_argument("--db", required=True, metavar="PATH", help="the results store")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv")
    p.add_argument("--out", required=True, metavar="DIR", help="directory of the table files")
    p.set_defaults(func=_command("metrics", "cmd_metrics"))

    return parser


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null (when stdout has one: not an in-process StringIO)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cron or CI timeout, `kill`): unwinds like Ctrl-C."""


def _on_signal(signum: int, frame: Any) -> None:
    """Ctrl-C or SIGTERM: stop every evaluation of this process first (other threads may be
    waiting on them, and a killed evaluation must not come back as a verdict), then unwind the
    main thread; runs are left resumable."""
    from .sandbox.judge.pool import cancel_open_pools

    cancel_open_pools()
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UserError as e:
        print(f"kernelwright: {e}", file=sys.stderr)
        return EXIT_USAGE
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, _on_signal)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit flush
        return code
    except KernelwrightError as e:
        # By whose fault it is (commands/common.py): the user's and the task's are one line,
        # exit 2; kernelwright's own keeps its traceback, for the bug report.
        if e.fault == "evaluator":
            traceback.print_exc()
        print(f"kernelwright: {e}", file=sys.stderr)
        return EXIT_FOR_FAULT[e.fault]
    except Terminated:
        print("kernelwright: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("kernelwright: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `kernelwright ... | head`: the reader left. Point stdout at /dev/null so that the exit's
        # flush does not fail again, say why on stderr, and exit as a process killed by SIGPIPE
        # would (141), which is what a shell's pipefail expects of a stopped writer.
        _silence_stdout()
        if args.command in ("optimize", "suite", "nightly", "chat"):  # work was cut short
            print("kernelwright: stopped: the output was closed (broken pipe)", file=sys.stderr)
        return EXIT_BROKEN_PIPE
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
