"""Every `KERNELWRIGHT_*` environment variable, declared once: name, type, default, help and
where it applies. RunConfig (run/config.py), LLMConfig (agents/llm/config.py), the CLI's help
texts and limits (cli.py) and the README's table read them here; a second declaration of a name
raises at import.
Over 700 lines because it is a table: fifty-five declarations of about ten lines each as
formatted, and no logic beyond reading one.

A room of its own on the floor of decisions.py: it imports only errors.py (the root exception,
from sandbox/errors.py) at import time; the shapes parser takes sandbox/task.py's size parser
when it runs. sandbox/ is sealed
and cannot import this module, so the evaluator's two variables (KERNELWRIGHT_CACHE_DIR in
sandbox/config.py, KERNELWRIGHT_GUARD_TRACE in sandbox/guard.py) are read there by name and
declared here for the table; tests/test_knobs.py holds every `KERNELWRIGHT_` name in the
package's source to this registry, so a variable read anywhere and missing here fails.

`python3 -m kernelwright.knobs` prints the README's table.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import KernelwrightError

PREFIX = "KERNELWRIGHT_"
# Where a knob takes effect: a run's RunConfig ("run"), a role's LLMConfig ("llm"), the
# evaluator ("evaluator", read in sandbox/), the results store ("store").
Where = Literal["run", "llm", "evaluator", "store"]
ROLES = ("planner", "coder", "critic")


class DuplicateKnob(KernelwrightError):
    """A name declared twice (a programming error: raised at import)."""

    fault = "evaluator"  # kernelwright's own mistake


@dataclass(frozen=True)
class Knob:
    """One environment variable. `field` is the config field it sets (RunConfig's when "run"
    is in `applies`, LLMConfig's when "llm" is, the same name in both), `flag` the CLI flag that
    beats it. `help` may hold `{default}`. `old_names` are still read, with a note once."""

    name: str
    type: str  # int, float, bool, str, duration, shapes, devices, optional float, json, path
    default: Any
    help: str
    applies: tuple[Where, ...]
    field: str | None = None
    flag: str | None = None
    minimum: float | None = None  # the smallest value that still means something
    positive: bool = False  # must be above 0
    maximum: float | None = None
    old_names: tuple[str, ...] = ()

    def describe(self) -> str:
        """The help with its default filled in."""
        return self.help.format(default=self.default)

    def parse(self, text: str) -> Any:
        """The value of `text` (ValueError when it is not one)."""
        return PARSERS[self.type](text)

    def lookup(self, env: Mapping[str, str]) -> tuple[str, str] | None:
        """(variable, text) set for this knob in `env`: its name, else an old name (said once
        on stderr); None when neither is set to something."""
        if env.get(self.name, "").strip():
            return self.name, env[self.name]
        for old in self.old_names:
            if env.get(old, "").strip():
                _note_old_name(old)
                return old, env[old]
        return None

    def read(self, env: Mapping[str, str]) -> Any:
        """The value set in `env` (None: not set); a bad one raises ValueError naming it."""
        found = self.lookup(env)
        if found is None:
            return None
        var, text = found
        try:
            return self.parse(text)
        except ValueError as e:
            raise ValueError(f"{var}={text!r}: {e}") from None

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` for this knob's limits, or None."""
        if value is None or (self.minimum is None and not self.positive and self.maximum is None):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            return f"expected a number, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"must be at least {self.minimum:g}, got {value:g}"
        if self.positive and value <= 0:
            return f"must be above 0, got {value:g}"
        if self.maximum is not None and value > self.maximum:
            return f"must be at most {self.maximum:g}, got {value:g}"
        return None


KNOBS: dict[str, Knob] = {}


def declare(name: str, type: str, default: Any, help: str, applies: tuple[Where, ...], **kw: Any):
    """Add a knob; a name (or an old name) declared before raises DuplicateKnob."""
    knob = Knob(name, type, default, help, applies, **kw)
    if not name.startswith(PREFIX) or type not in PARSERS:
        raise ValueError(f"knob {name!r}: a name starts with {PREFIX}; type one of {list(PARSERS)}")
    if name in KNOBS or name in _old_names():
        raise DuplicateKnob(f"{name} is declared twice (knobs.py)")
    if any(old in KNOBS for old in knob.old_names):
        raise DuplicateKnob(f"{name}: an old name of it is a knob of its own")
    KNOBS[name] = knob
    return knob


def _old_names() -> set[str]:
    return {old for knob in KNOBS.values() for old in knob.old_names}


def for_field(field: str, where: Where = "run") -> Knob:
    """The knob that sets `field` of RunConfig ("run") or LLMConfig ("llm")."""
    for knob in KNOBS.values():
        if knob.field == field and where in knob.applies:
            return knob
    raise KeyError(f"no knob sets {where} field {field!r}")


def defaults(where: Where) -> dict[str, Any]:
    """{field: default} of RunConfig ("run") or LLMConfig ("llm"): what the dataclasses take."""
    return {k.field: k.default for k in KNOBS.values() if where in k.applies and k.field}


def fields(where: Where) -> Iterator[Knob]:
    return (k for k in KNOBS.values() if where in k.applies and k.field)


_noted: set[str] = set()


def _note_old_name(old: str) -> None:
    """One line on stderr, once per process, for a deprecated name that is set."""
    if old in _noted:
        return
    _noted.add(old)
    now = sorted(k.name for k in KNOBS.values() if old in k.old_names)
    print(
        f"kernelwright: {old} is deprecated; it still sets {' and '.join(now)}: set "
        f"{'those' if len(now) > 1 else 'that'} instead",
        file=sys.stderr,
    )


# -- parsers -----------------------------------------------------------------------------------
def parse_bool(text: str) -> bool:
    """A boolean environment value: 1/true/yes/on or 0/false/no/off (empty: false); anything
    else is an error, not a silent false."""
    if text.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if text.strip().lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{text!r} is not a boolean (use 1/0, true/false)")


def parse_duration(text: str) -> float:
    """Seconds in '90', '90s', '30m', '1.5h' or '1h30m'."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        raise ValueError(f"{text!r} is not a duration (try 90s, 30m, 1h30m)")
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0}
    return sum(float(n) * scale[u] for n, u in parts)


def parse_shapes(text: str) -> dict[str, int | tuple[int, ...]]:
    """{'N': 64, 'kernel_size': (3, 5)} from 'N=64,kernel_size=3,5' (the environment's form of
    repeated --shape): an item without '=' continues the tuple before it."""
    from .sandbox.task import parse_size

    items: list[list[str]] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        if "=" in item:
            items.append([item])
        elif items:
            items[-1].append(item)
        else:
            raise ValueError(f"shape {item!r} is not NAME=VALUE")
    shapes = {}
    for parts in items:
        name, _, value = ",".join(parts).partition("=")
        shapes[name.strip()] = parse_size(value)
    return shapes


def _optional_float(text: str) -> float | None:
    return None if text.strip().lower() in ("none", "") else float(text)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None


PARSERS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "bool": parse_bool,
    "str": str,
    "path": str,
    "duration": parse_duration,
    "shapes": parse_shapes,
    "devices": lambda text: tuple(d.strip() for d in text.split(",") if d.strip()),
    "optional float": _optional_float,
    "json": _json,
}

# -- the registry ------------------------------------------------------------------------------
# Models (RunConfig and LLMConfig alike).
declare(
    "KERNELWRIGHT_MODEL",
    "str",
    None,
    "model of every agent; 'offline' = rules + fusion codegen",
    ("run", "llm"),
    field="model",
    flag="--model",
)
for _role in ROLES:
    declare(
        f"KERNELWRIGHT_{_role.upper()}_MODEL",
        "str",
        None,
        f"the {_role}'s model (default: --model)",
        ("run",),
        field=f"{_role}_model",
        flag=f"--{_role}-model",
    )
declare(
    "KERNELWRIGHT_CONTEXT_WINDOW",
    "int",
    None,
    "the model's context window, input plus output (default: known for OpenAI models, else "
    "32768, and what the server states in its errors)",
    ("run", "llm"),
    field="context_window",
    flag="--context-window",
    minimum=1,
)
declare(
    "KERNELWRIGHT_MAX_OUTPUT_TOKENS",
    "int",
    None,
    "the most tokens a reply may use (default 8192, fitted to what the window leaves after the "
    "prompt)",
    ("run", "llm"),
    field="max_output_tokens",
    flag="--max-output-tokens",
    minimum=1,
)
for _setting, _what in (("context_window", "context window"), ("max_output_tokens", "output")):
    for _role in ROLES:
        declare(
            f"KERNELWRIGHT_{_role.upper()}_{_setting.upper()}",
            "int",
            None,
            f"the {_role}'s {_what} tokens (default: KERNELWRIGHT_{_setting.upper()}; a flag "
            "for every role beats it)",
            ("run",),
            field=f"{_role}_{_setting}",
            flag=f"--{_setting.replace('_', '-')} {_role}=TOKENS",
            minimum=1,
        )
declare(
    "KERNELWRIGHT_FALLBACK_OFFLINE",
    "bool",
    False,
    "accept a run whose configured model answered no call (done with the rules and the fusion "
    "codegen) as a success; without it such a run exits 3",
    ("run",),
    field="fallback_offline",
    flag="--fallback-offline",
)
# Search shape and budgets.
declare(
    "KERNELWRIGHT_ROUNDS",
    "int",
    5,
    "at most this many rounds (default {default})",
    ("run",),
    field="rounds",
    flag="--rounds",
    minimum=1,
)
declare(
    "KERNELWRIGHT_CANDIDATES",
    "int",
    3,
    "candidates per round (default {default})",
    ("run",),
    field="candidates",
    flag="--candidates",
    minimum=1,
)
declare(
    "KERNELWRIGHT_PATIENCE",
    "int",
    2,
    "stop after this many rounds without a better kernel (default {default})",
    ("run",),
    field="patience",
    flag="--patience",
    minimum=1,
)
declare(
    "KERNELWRIGHT_MARGIN",
    "float",
    0.02,
    "relative gain that counts as better (default {default})",
    ("run",),
    field="margin",
    flag="--margin",
    minimum=0.0,
)
declare(
    "KERNELWRIGHT_ROOFLINE_TARGET",
    "float",
    0.9,
    "stop at this fraction of the roofline (default {default})",
    ("run",),
    field="roofline_target",
    flag="--roofline-target",
    positive=True,
    maximum=1.0,
)
declare(
    "KERNELWRIGHT_BUDGET_TOKENS",
    "int",
    None,
    "stop once LLM calls used this many tokens",
    ("run",),
    field="budget_tokens",
    flag="--budget-tokens",
    minimum=1,
)
declare(
    "KERNELWRIGHT_BUDGET_USD",
    "float",
    None,
    "stop once LLM calls cost this much",
    ("run",),
    field="budget_usd",
    flag="--budget-usd",
    positive=True,
)
declare(
    "KERNELWRIGHT_TIME_BUDGET",
    "duration",
    None,
    "stop after this much work, e.g. 30m or 1h30m",
    ("run",),
    field="time_budget_s",
    flag="--time-budget",
    positive=True,
)
# What the evaluator judges.
declare(
    "KERNELWRIGHT_DTYPE",
    "str",
    "fp32",
    "cast model and floating inputs (default {default})",
    ("run",),
    field="dtype",
    flag="--dtype",
)
declare(
    "KERNELWRIGHT_SHAPES",
    "shapes",
    {},
    "size constants of the task, NAME=VALUE,... (a tuple as NAME=3,5)",
    ("run",),
    field="shapes",
    flag="--shape",
)
declare(
    "KERNELWRIGHT_PRECISION",
    "str",
    "strict",
    "strict (default): fp32 must be fp32-accurate; tf32-ok accepts TF32",
    ("run",),
    field="precision",
    flag="--precision",
)
declare(
    "KERNELWRIGHT_BASELINE",
    "str",
    "fastest",
    "what a kernel must beat to win: fastest (default: the faster of PyTorch eager and "
    "torch.compile), eager, or compile",
    ("run",),
    field="baseline",
    flag="--baseline",
)
declare(
    "KERNELWRIGHT_TRIALS",
    "int",
    None,
    "correctness trials per candidate (default 3)",
    ("run",),
    field="trials",
    flag="--trials",
    minimum=1,
)
declare(
    "KERNELWRIGHT_EVAL_TIMEOUT_S",
    "float",
    None,
    "wall-clock seconds for each candidate (default 180)",
    ("run",),
    field="eval_timeout_s",
    positive=True,
)
declare(
    "KERNELWRIGHT_MAX_MEMORY_GB",
    "float",
    None,
    "device memory a candidate may peak at (default: max(4x the reference's peak, the "
    "reference's peak + 1 GiB))",
    ("run",),
    field="max_memory_gb",
    flag="--max-memory",
    positive=True,
)
declare(
    "KERNELWRIGHT_WORKERS",
    "int",
    None,
    "evaluator worker processes",
    ("run",),
    field="workers",
    flag="--workers",
    minimum=1,
)
declare(
    "KERNELWRIGHT_DEVICES",
    "devices",
    (),
    "GPUs the evaluator may use, cuda:0,cuda:1 (default: all; `suite --jobs` sets one per job)",
    ("run",),
    field="devices",
)
# Where candidates are evaluated.
declare(
    "KERNELWRIGHT_EXECUTOR",
    "str",
    "local",
    "where candidates are evaluated: local (default: this machine's GPUs or cores) or ray (one "
    "evaluator actor per GPU of a Ray cluster; env KERNELWRIGHT_EXECUTOR)",
    ("run",),
    field="executor",
    flag="--executor",
)
declare(
    "KERNELWRIGHT_RAY_ADDRESS",
    "str",
    None,
    "the Ray cluster to join with --executor ray (default: $RAY_ADDRESS, else a Ray started on "
    "this machine for the run)",
    ("run",),
    field="ray_address",
    flag="--ray-address",
)
# KERNELWRIGHT_MAX_RETRIES set both this and KERNELWRIGHT_LLM_MAX_RETRIES (issue 26). README
# names neither variable (its --max-retries is this one; LLMConfig's docstring named it the
# LLM's, and the tests set it for the LLM), so the old name still sets both, as it did.
declare(
    "KERNELWRIGHT_RAY_MAX_RETRIES",
    "int",
    2,
    "with --executor ray: send a job again at most N times when its actor or node dies "
    "(default {default}); after that it reads crashed (an evaluator error)",
    ("run",),
    field="max_retries",
    flag="--max-retries",
    minimum=0,
    old_names=("KERNELWRIGHT_MAX_RETRIES",),
)
# The launch-constant sweep, the CPU shrink, the fusion seed.
declare(
    "KERNELWRIGHT_TUNE",
    "bool",
    True,
    "sweep the `# tune:` constants of correct candidates",
    ("run",),
    field="tune",
    flag="--no-tune",
)
declare(
    "KERNELWRIGHT_TUNE_LIMIT",
    "int",
    6,
    "at most this many extra evaluations per candidate in the sweep (default {default})",
    ("run",),
    field="tune_limit",
    minimum=0,
)
declare(
    "KERNELWRIGHT_CPU_INPUT_BYTES",
    "int",
    # The interpreter runs ~1 ms per program instance, so inputs and parameters are shrunk to
    # this many bytes (run/shrink.py): a KernelBench level-1 task (a ReLU over ~13 GB) then
    # checks in seconds instead of exhausting the memory or the timeout of a CPU machine.
    256 * 1024,
    "without CUDA, inputs are shrunk to this many bytes unless --shape is given (default "
    "{default})",
    ("run",),
    field="cpu_input_bytes",
    minimum=1,
)
declare(
    "KERNELWRIGHT_FUSION_SEED",
    "bool",
    True,
    "the fusion codegen's kernel joins round 1 as an extra candidate when an LLM codes",
    ("run",),
    field="fusion_seed",
    flag="--no-fusion-seed",
)
# Where things go.
declare(
    "KERNELWRIGHT_OUT_DIR",
    "path",
    "runs",
    "directory of run directories (default ./{default})",
    ("run",),
    field="out_dir",
    flag="--out",
)
declare(
    "KERNELWRIGHT_NO_CACHE",
    "bool",
    False,
    "do not replay cached LLM replies, nor what endpoints taught earlier runs",
    ("run", "llm"),
    field="no_cache",
    flag="--no-cache",
)
declare(
    "KERNELWRIGHT_CHAT",
    "bool",
    False,
    "the run is a chat's (set by `kernelwright chat`)",
    ("run",),
    field="chat",
)
declare(
    "KERNELWRIGHT_DB",
    "path",
    None,
    "results store (default: $KERNELWRIGHT_DB, else kernelwright.db inside --out); give the "
    "same PATH to several out directories to share one",
    ("run", "store"),
    field="db",
    flag="--db",
)
# The LLM client (LLMConfig), per HTTP call.
declare(
    "KERNELWRIGHT_AZURE",
    "bool",
    False,
    "use Azure OpenAI (also when AZURE_OPENAI_ENDPOINT is set)",
    ("llm",),
    field="azure",
)
declare(
    "KERNELWRIGHT_TIMEOUT_S",
    "float",
    120.0,
    "seconds per HTTP attempt; streamed, the longest silence between two chunks (default "
    "{default:g})",
    ("llm",),
    field="timeout_s",
    positive=True,
)
declare(
    "KERNELWRIGHT_CALL_BUDGET_S",
    "float",
    300.0,
    "no retry starts once a call has taken this many seconds (default {default:g})",
    ("llm",),
    field="call_budget_s",
    positive=True,
)
declare(
    "KERNELWRIGHT_BREAKER_FAILURES",
    "int",
    3,
    "after this many calls in a row failed, the endpoint is not called again in the run "
    "(default {default})",
    ("llm",),
    field="breaker_failures",
    minimum=1,
)
declare(
    "KERNELWRIGHT_LLM_MAX_RETRIES",
    "int",
    4,
    "retries of an LLM call after its first attempt, for 429/5xx/drops; a timeout is retried "
    "once (default {default})",
    ("llm",),
    field="max_retries",
    minimum=0,
    old_names=("KERNELWRIGHT_MAX_RETRIES",),
)
declare(
    "KERNELWRIGHT_RETRY_BASE_S",
    "float",
    1.0,
    "backoff between retries: this times 2**(attempt-1), jittered (default {default:g} s)",
    ("llm",),
    field="retry_base_s",
    minimum=0.0,
)
declare(
    "KERNELWRIGHT_MAX_CONCURRENCY",
    "int",
    4,
    "requests in flight per client (default {default})",
    ("llm",),
    field="max_concurrency",
    minimum=1,
)
declare(
    "KERNELWRIGHT_TEMPERATURE",
    "optional float",
    0.2,
    "sampling temperature; none: not sent (reasoning models reject it) (default {default})",
    ("llm",),
    field="temperature",
)
declare(
    "KERNELWRIGHT_STREAM",
    "bool",
    True,
    "stream replies, so a long generation is never cut by the timeout",
    ("llm",),
    field="stream",
)
declare(
    "KERNELWRIGHT_RESPONSE_FORMAT",
    "str",
    "json_schema",
    "structured replies: json_schema (default), json_object or none",
    ("llm",),
    field="response_format",
)
declare(
    "KERNELWRIGHT_SEED",
    "int",
    None,
    "the seed sent with every request",
    ("llm",),
    field="seed",
)
declare(
    "KERNELWRIGHT_PRICES",
    "json",
    None,
    'USD per 1M (input, output) tokens by model prefix, added to the table: {{"model": [in, out]}}',
    ("llm",),
    field="prices",
)
# Read by name in sandbox/ (sealed: it imports nothing of kernelwright outside itself).
declare(
    "KERNELWRIGHT_CACHE_DIR",
    "path",
    None,
    "kernelwright's cache (measured device ceilings, LLM replies; default ~/.cache/kernelwright)",
    ("evaluator", "llm"),
)
declare(
    "KERNELWRIGHT_GUARD_TRACE",
    "path",
    None,
    "a file where the sandbox guard appends each denial's whole stack",
    ("evaluator",),
)


def readme_table() -> str:
    """The README's table of variables, generated from the registry."""
    rows = ["| variable | type | default | applies to | what |", "|---|---|---|---|---|"]
    for knob in KNOBS.values():
        name = f"`{knob.name}`" + "".join(f" (was `{old}`)" for old in knob.old_names)
        shown = "-" if knob.default in (None, (), {}) else f"`{knob.default}`"
        flag = f" Flag `{knob.flag}`." if knob.flag else ""
        text = knob.describe().replace("|", "\\|")
        rows.append(
            f"| {name} | {knob.type} | {shown} | {', '.join(knob.applies)} | {text}.{flag} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(readme_table())
