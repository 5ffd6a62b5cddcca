"""RunConfig, one run's knobs (CLI flags, then environment, then defaults)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .. import knobs
from ..cluster import EXECUTORS

# Re-exported: the parsers moved to the registry (knobs.py) with the variables they read.
from ..knobs import parse_bool as parse_bool
from ..knobs import parse_duration as parse_duration
from ..knobs import parse_shapes as parse_shapes
from ..sandbox.contract import DType, PrecisionPolicy

# The bytes a task's inputs are shrunk to without CUDA (run/shrink.py; knobs.py says why). Read
# here, not in shrink.py: that one needs the task loader (torch), and reading a RunConfig must not.
CPU_INPUT_BYTES: int = knobs.for_field("cpu_input_bytes").default

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
ENV_PREFIX = knobs.PREFIX
_D = knobs.defaults("run")  # every default below is the registry's (knobs.py)


@dataclass(frozen=True)
class RunConfig:
    """How one `kernelwright optimize` run searches, judges and stops.

    Each field may come from a CLI flag, its environment variable (knobs.py: KERNELWRIGHT_ROUNDS,
    KERNELWRIGHT_CODER_MODEL, ...), or its default (knobs.py too), in that order.
    """

    # Models. `model` is the default of every role; "offline" means rules + fusion codegen.
    model: str | None = _D["model"]
    planner_model: str | None = _D["planner_model"]
    coder_model: str | None = _D["coder_model"]
    critic_model: str | None = _D["critic_model"]
    # The model's context window and the most output tokens a reply may use (None: the known
    # window of the model, else 32k, and up to 8k output fitted to what the prompt leaves); a
    # role's own setting beats the run's. A server that states a smaller window is believed.
    context_window: int | None = _D["context_window"]
    planner_context_window: int | None = _D["planner_context_window"]
    coder_context_window: int | None = _D["coder_context_window"]
    critic_context_window: int | None = _D["critic_context_window"]
    max_output_tokens: int | None = _D["max_output_tokens"]
    planner_max_output_tokens: int | None = _D["planner_max_output_tokens"]
    coder_max_output_tokens: int | None = _D["coder_max_output_tokens"]
    critic_max_output_tokens: int | None = _D["critic_max_output_tokens"]
    # A run whose configured model answered no call exits 3 (nightly and CI notice); True
    # accepts such a run, done with the rules and the fusion codegen, as a success.
    fallback_offline: bool = _D["fallback_offline"]
    # Search shape.
    rounds: int = _D["rounds"]
    candidates: int = _D["candidates"]  # per round, written in parallel
    patience: int = _D["patience"]  # rounds without a better verified kernel before stopping
    margin: float = _D["margin"]  # a new best must beat the old one by this much to count
    roofline_target: float = _D["roofline_target"]  # stop at this fraction of the physical bound
    # Budgets (None: unlimited). Time counts the run's own work, not the gap before a resume.
    budget_tokens: int | None = _D["budget_tokens"]
    budget_usd: float | None = _D["budget_usd"]
    time_budget_s: float | None = _D["time_budget_s"]
    # What the evaluator judges.
    dtype: DType = _D["dtype"]
    shapes: dict[str, int] = field(default_factory=lambda: dict(_D["shapes"]))
    precision: PrecisionPolicy = _D["precision"]
    # What a kernel must beat to win: "fastest" (the faster of eager and torch.compile), "eager"
    # or "compile" (decisions.BASELINES).
    baseline: str = _D["baseline"]
    trials: int | None = _D["trials"]  # correctness trials per candidate (None: EvalConfig's)
    eval_timeout_s: float | None = _D["eval_timeout_s"]  # per candidate (None: EvalConfig's)
    # Device memory a candidate may peak at, GB (None: max(4x the reference's, + 1 GiB)).
    max_memory_gb: float | None = _D["max_memory_gb"]
    workers: int | None = _D["workers"]  # evaluator processes (None: the pool's choice)
    # GPUs the evaluator may use ("cuda:0", ...; empty: all). Set per job by `suite --jobs` so
    # concurrent tasks never time on the same GPU; belongs to the invocation, not to the run
    # (a resumed run takes the resuming invocation's).
    devices: tuple[str, ...] = _D["devices"]
    # Where candidates are evaluated (cluster/): "local" (this machine's pool) or "ray" (one actor
    # per GPU of a Ray cluster at ray_address, else RAY_ADDRESS, else a Ray started here), and
    # how often a job lost with its actor (or node) is sent again before it reads `crashed`.
    # Like devices, these belong to the invocation: a resumed run takes the resuming one's.
    executor: str = _D["executor"]
    ray_address: str | None = _D["ray_address"]
    max_retries: int = _D["max_retries"]
    # Launch-constant sweep of correct candidates (`# tune:` comments); at most this many extra
    # evaluations per candidate, since each one costs a full correctness check.
    tune: bool = _D["tune"]
    tune_limit: int = _D["tune_limit"]
    # Without CUDA the interpreter runs ~1 ms per program instance, so inputs are shrunk to this
    # many bytes unless the user set --shape (agents/shrink.py).
    cpu_input_bytes: int = _D["cpu_input_bytes"]
    # The fusion codegen's kernel joins round 1 as an extra candidate when an LLM codes.
    fusion_seed: bool = _D["fusion_seed"]
    # Where things go. The response cache is agents/llm/cache.py's (KERNELWRIGHT_CACHE_DIR);
    # no_cache skips reading it (replies are still stored).
    out_dir: str = _D["out_dir"]
    no_cache: bool = _D["no_cache"]
    chat: bool = _D["chat"]
    # The results store (store.py) the run records into and whose verdict cache the tester
    # reads; None: no store (the CLI always sets one: --db, KERNELWRIGHT_DB, else inside out_dir).
    db: str | None = _D["db"]

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


def value_problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` for RunConfig field `name`, or None when it can be used (the
    limits are the registry's, knobs.py)."""
    if name == "baseline":
        from ..decisions import BASELINES

        return None if value in BASELINES else f"must be one of {', '.join(BASELINES)}"
    if name == "executor":
        return None if value in EXECUTORS else f"must be one of {', '.join(EXECUTORS)}"
    if name == "roofline_target" and isinstance(value, (int, float)) and value > 1:
        return f"is a fraction of the roofline, at most 1, got {value:g}"
    return knobs.for_field(name).problem(value)


def flag_name(field_name: str) -> str:
    """The command-line flag of a field: --time-budget for time_budget_s."""
    name = field_name.removesuffix("_s") if field_name.endswith("budget_s") else field_name
    name = name.removesuffix("_gb")  # --max-memory for max_memory_gb
    return "--" + name.replace("_", "-")


def env_name(field_name: str) -> str:
    """The environment variable of a field: KERNELWRIGHT_TIME_BUDGET for time_budget_s."""
    return knobs.for_field(field_name).name


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
        elif knobs.for_field(f.name).lookup(env) is not None:
            values[f.name], sources[f.name] = knobs.for_field(f.name).read(env), "env"
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
