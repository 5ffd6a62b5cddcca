"""RunConfig, one run's knobs (CLI flags, then environment, then defaults)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..cluster import EXECUTORS
from ..sandbox.contract import DType, PrecisionPolicy

# The interpreter runs ~1 ms per program instance, so inputs and parameters are shrunk to this
# many bytes (run/shrink.py): a KernelBench level-1 task (a ReLU over ~13 GB) then checks in
# seconds instead of exhausting the memory or the timeout of a CPU machine. Here, not in
# shrink.py: that one needs the task loader (torch), and reading a RunConfig must not.
CPU_INPUT_BYTES = 256 * 1024

if TYPE_CHECKING:
    from ..sandbox.config import EvalConfig

Role = Literal["planner", "coder", "critic"]
ROLES: tuple[Role, ...] = ("planner", "coder", "critic")
# RunConfig settings that a role may override with its own `<role>_<setting>` field.
ROLE_SETTINGS = ("model", "context_window", "max_output_tokens")
OFFLINE = "offline"
# What a run with no model says once, at its start (graph.announce_models; a chat at its start).
OFFLINE_NOTE = (
    "no model configured: running offline (rule-based planner and critic, fusion codegen as "
    "coder); set OPENAI_API_KEY and --model to use an LLM"
)
ENV_PREFIX = "KERNELWRIGHT_"


@dataclass(frozen=True)
class RunConfig:
    """How one `kernelwright optimize` run searches, judges and stops.

    Each field may come from a CLI flag, an environment variable `KERNELWRIGHT_<FIELD>` (upper
    case: KERNELWRIGHT_ROUNDS, KERNELWRIGHT_CODER_MODEL, ...), or the default here, in that order.
    """

    # Models. `model` is the default of every role; "offline" means rules + fusion codegen.
    model: str | None = None
    planner_model: str | None = None
    coder_model: str | None = None
    critic_model: str | None = None
    # The model's context window and the most output tokens a reply may use (None: the known
    # window of the model, else 32k, and up to 8k output fitted to what the prompt leaves); a
    # role's own setting beats the run's. A server that states a smaller window is believed.
    context_window: int | None = None
    planner_context_window: int | None = None
    coder_context_window: int | None = None
    critic_context_window: int | None = None
    max_output_tokens: int | None = None
    planner_max_output_tokens: int | None = None
    coder_max_output_tokens: int | None = None
    critic_max_output_tokens: int | None = None
    # A run whose configured model answered no call exits 3 (nightly and CI notice); True
    # accepts such a run, done with the rules and the fusion codegen, as a success.
    fallback_offline: bool = False
    # Search shape.
    rounds: int = 5
    candidates: int = 3  # per round, written in parallel
    patience: int = 2  # rounds without a better verified kernel before stopping
    margin: float = 0.02  # a new best must beat the old one by 2% to count as progress
    roofline_target: float = 0.9  # stop once the best kernel reaches 90% of the physical bound
    # Budgets (None: unlimited). Time counts the run's own work, not the gap before a resume.
    budget_tokens: int | None = None
    budget_usd: float | None = None
    time_budget_s: float | None = None
    # What the evaluator judges.
    dtype: DType = "fp32"
    shapes: dict[str, int] = field(default_factory=dict)
    precision: PrecisionPolicy = "strict"
    # What a kernel must beat to win: "fastest" (the faster of eager and torch.compile), "eager"
    # or "compile" (decisions.BASELINES).
    baseline: str = "fastest"
    trials: int | None = None  # correctness trials per candidate (None: EvalConfig's default)
    eval_timeout_s: float | None = None  # per candidate (None: EvalConfig's default)
    # Device memory a candidate may peak at, GB (None: max(4x the reference's, + 1 GiB)).
    max_memory_gb: float | None = None
    workers: int | None = None  # evaluator processes (None: the pool's choice)
    # GPUs the evaluator may use ("cuda:0", ...; empty: all). Set per job by `suite --jobs` so
    # concurrent tasks never time on the same GPU; belongs to the invocation, not to the run
    # (a resumed run takes the resuming invocation's).
    devices: tuple[str, ...] = ()
    # Where candidates are evaluated (cluster/): "local" (this machine's pool) or "ray" (one actor
    # per GPU of a Ray cluster at ray_address, else RAY_ADDRESS, else a Ray started here), and
    # how often a job lost with its actor (or node) is sent again before it reads `crashed`.
    # Like devices, these belong to the invocation: a resumed run takes the resuming one's.
    executor: str = "local"
    ray_address: str | None = None
    max_retries: int = 2
    # Launch-constant sweep of correct candidates (`# tune:` comments); at most this many extra
    # evaluations per candidate, since each one costs a full correctness check.
    tune: bool = True
    tune_limit: int = 6
    # Without CUDA the interpreter runs ~1 ms per program instance, so inputs are shrunk to this
    # many bytes unless the user set --shape (agents/shrink.py).
    cpu_input_bytes: int = CPU_INPUT_BYTES
    # The fusion codegen's kernel joins round 1 as an extra candidate when an LLM codes.
    fusion_seed: bool = True
    # Where things go. The response cache is agents/llm/cache.py's (KERNELWRIGHT_CACHE_DIR);
    # no_cache skips reading it (replies are still stored).
    out_dir: str = "runs"
    no_cache: bool = False
    chat: bool = False
    # The results store (store.py) the run records into and whose verdict cache the tester
    # reads; None: no store (the CLI always sets one: --db, KERNELWRIGHT_DB, else inside out_dir).
    db: str | None = None

    def model_for(self, role: Role) -> str | None:
        """The model a role uses: its own setting, else the run's default model."""
        return getattr(self, f"{role}_model") or self.model

    def context_window_for(self, role: Role) -> int | None:
        return getattr(self, f"{role}_context_window") or self.context_window

    def max_output_tokens_for(self, role: Role) -> int | None:
        return getattr(self, f"{role}_max_output_tokens") or self.max_output_tokens

    def invocation(self) -> dict[str, Any]:
        """The fields that belong to an invocation, not to a run: where it evaluates. A resumed
        run takes the resuming invocation's."""
        return {name: getattr(self, name) for name in INVOCATION_FIELDS}

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in known}
        if "devices" in fields:
            fields["devices"] = tuple(fields["devices"] or ())
        return cls(**fields)


INVOCATION_FIELDS = ("devices", "executor", "ray_address", "max_retries")

# The smallest value of each knob that still means something: `rounds = 0` would still run a
# round (the critic counts a round after it ran), `trials = 0` would verify nothing.
MINIMUMS: dict[str, float] = {
    "rounds": 1,
    "candidates": 1,
    "patience": 1,
    "trials": 1,
    "workers": 1,
    "max_retries": 0,
    "budget_tokens": 1,
    "tune_limit": 0,
    "cpu_input_bytes": 1,
    "margin": 0.0,
}
# Knobs that must be above zero (a zero budget would stop before the first round).
POSITIVE = ("budget_usd", "time_budget_s", "eval_timeout_s", "roofline_target", "max_memory_gb")


def value_problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` for RunConfig field `name`, or None when it can be used."""
    if name == "baseline":
        from ..decisions import BASELINES

        return None if value in BASELINES else f"must be one of {', '.join(BASELINES)}"
    if name == "executor":
        return None if value in EXECUTORS else f"must be one of {', '.join(EXECUTORS)}"
    if value is None or name not in (*MINIMUMS, *POSITIVE):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return f"expected a number, got {value!r}"
    if name in MINIMUMS and value < MINIMUMS[name]:
        return f"must be at least {MINIMUMS[name]:g}, got {value:g}"
    if name in POSITIVE and value <= 0:
        return f"must be above 0, got {value:g}"
    if name == "roofline_target" and value > 1:
        return f"is a fraction of the roofline, at most 1, got {value:g}"
    return None


def flag_name(field_name: str) -> str:
    """The command-line flag of a field: --time-budget for time_budget_s."""
    name = field_name.removesuffix("_s") if field_name.endswith("budget_s") else field_name
    name = name.removesuffix("_gb")  # --max-memory for max_memory_gb
    return "--" + name.replace("_", "-")


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
    from ..sandbox.task import parse_size

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


def parse_bool(text: str) -> bool:
    """A boolean environment value: 1/true/yes/on or 0/false/no/off (empty: false); anything
    else is an error, not a silent false. RunConfig's and LLMConfig's variables both use it."""
    if text.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if text.strip().lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{text!r} is not a boolean (use 1/0, true/false)")


def _parser_for(f: dataclasses.Field) -> Callable[[str], Any]:
    if f.name == "time_budget_s":
        return parse_duration
    if f.name == "shapes":
        return parse_shapes
    if f.name == "devices":  # KERNELWRIGHT_DEVICES=cuda:0,cuda:1
        return lambda text: tuple(d.strip() for d in text.split(",") if d.strip())
    kind = str(f.type)
    if kind.startswith("bool"):
        return parse_bool
    if kind.startswith("int"):
        return int
    if kind.startswith("float"):
        return float
    return str


def env_name(field_name: str) -> str:
    """The environment variable of a field: KERNELWRIGHT_TIME_BUDGET for time_budget_s."""
    name = field_name.removesuffix("_s") if field_name.endswith("budget_s") else field_name
    return ENV_PREFIX + name.upper()


def resolve_config(
    flags: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> tuple[RunConfig, dict[str, str]]:
    """The run's config and where each field came from ("flag", "env" or "default").

    A flag counts when it is not None (argparse leaves unset options at None). An unparseable
    environment value raises ValueError naming the variable.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for f in dataclasses.fields(RunConfig):
        if flags.get(f.name) is not None and flags.get(f.name) != {}:
            values[f.name], sources[f.name] = flags[f.name], "flag"
        elif env.get(env_name(f.name), "").strip():
            raw = env[env_name(f.name)]
            try:
                values[f.name] = _parser_for(f)(raw)
            except ValueError as e:
                raise ValueError(f"{env_name(f.name)}={raw!r}: {e}") from None
            sources[f.name] = "env"
        else:
            sources[f.name] = "default"
    # A role's own setting from the environment must not beat the run's given on the command
    # line (KERNELWRIGHT_CODER_MODEL under --model, KERNELWRIGHT_CODER_CONTEXT_WINDOW under
    # --context-window).
    for general in ROLE_SETTINGS:
        for role in ROLES:
            name = f"{role}_{general}"
            if sources[name] == "env" and sources[general] == "flag":
                values.pop(name)
                sources[name] = "default"
    for name, value in values.items():
        problem = value_problem(name, value)
        if problem:
            where = env_name(name) if sources[name] == "env" else flag_name(name)
            raise ValueError(f"{where} {problem}")
    return RunConfig(**values), sources


def eval_config_for(config: RunConfig) -> EvalConfig:
    """How the evaluator judges this run's candidates."""
    from ..sandbox.config import EvalConfig

    fields: dict[str, Any] = {
        "dtype": config.dtype,
        "shapes": dict(config.shapes),
        "precision": config.precision,
    }
    if config.trials is not None:
        fields["trials"] = config.trials
    if config.eval_timeout_s is not None:
        fields["timeout_s"] = config.eval_timeout_s
    if config.max_memory_gb is not None:
        fields["max_memory_gb"] = config.max_memory_gb
    return EvalConfig(**fields)
