"""RunState, the graph's checkpointed state, and the schemas the agents decide with."""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator
from typing_extensions import TypedDict

from ..decisions import baseline_speedup, winner
from ..run.config import RunConfig
from ..run.rundir import candidate_key
from ..sandbox.results import EvalResult
from .llm import AgentUsage

# Why a run stopped, as run.json and the report record it.
StopReason = Literal[
    "patience",  # no better verified kernel for `patience` rounds
    "roofline",  # the best kernel reached the target fraction of the physical bound
    "rounds",  # the round budget is spent
    "tokens",  # the token budget is spent
    "cost",  # the dollar budget is spent
    "time",  # the wall-time budget is spent
    "no-candidate",  # the offline coder produced nothing the evaluator could judge
    "exhausted",  # the offline (deterministic) coder has nothing new to try
    "critic",  # the critic judged further rounds pointless
    "user",  # chat mode: the person ended it
    "task-error",  # the task's reference fails at its own shape: nothing can be judged
]

# A candidate's status: the evaluator's EvalResult.status, or why it never reached the evaluator.
CandidateStatus = Literal[
    "pending",  # written by the coder, not evaluated yet
    "ok",
    "rejected",
    "compile_error",
    "runtime_error",
    "incorrect",
    "timeout",
    "crashed",
    "no_code",  # the coder's replies held no usable code block, even after the follow-up
    "duplicate",  # the same source was already evaluated in this run
]


class Idea(BaseModel):
    """One candidate's direction within a round's plan."""

    title: str = Field(description="a few words naming the approach")
    approach: str = Field(
        description="what the candidate does concretely: which ops one kernel fuses, the tiling "
        "(what one program computes), the memory layout and the launch constants"
    )


class Plan(BaseModel):
    """What one round tries and why (the planner's decision)."""

    model_config = ConfigDict(extra="ignore")

    summary: str = Field(
        description="one sentence: what this round tries and why (the report shows it)"
    )
    fuse: list[str] = Field(default_factory=list, description="the ops to fuse into one kernel")
    precision: str = Field(
        default="fp32 accumulation", description="precision policy, e.g. 'fp32 accumulation'"
    )
    ideas: list[Idea] = Field(min_length=1, description="one idea per candidate, distinct")


class Feedback(BaseModel):
    """What one candidate got wrong or could do better, in terms the coder can act on."""

    candidate: int = Field(description="the candidate's number in the round (1-based)")
    problem: str = Field(description="the error line, mismatch pattern, roofline gap or spill")
    fix: str = Field(description="the concrete change to make next round")


class Critique(BaseModel):
    """The critic's reading of a round and its verdict."""

    model_config = ConfigDict(extra="ignore")

    summary: str = Field(description="one or two sentences on the round's outcome")
    feedback: list[Feedback] = Field(default_factory=list)
    verdict: Literal["continue", "stop"] = Field(
        description="stop only when further rounds are unlikely to find a faster verified kernel"
    )
    reason: str = Field(default="", description="why continue or stop, one sentence")


def _eval_result(value: Any) -> EvalResult:
    """A candidate's verdict as the state holds it: an EvalResult, rebuilt from its to_dict()
    form (how a checkpoint stores it, and how checkpoints before the typed field held it)."""
    if isinstance(value, EvalResult):
        return value
    if isinstance(value, Mapping):
        try:
            return EvalResult.from_dict(dict(value))
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"not an EvalResult: {e}") from None
    raise ValueError(f"expected an EvalResult or its dict, got {type(value).__name__}")


# EvalResult is a frozen dataclass of sandbox/ (sealed: no pydantic there). In the state it is
# validated from and dumped to EvalResult.to_dict(), JSON data: LangGraph's serializer stores a
# Candidate as its model_dump(), so a checkpoint holds no class but the allowed ones below, and
# a checkpoint written when this field was a plain dict revives as an EvalResult too.
Verdict = Annotated[
    EvalResult,
    PlainValidator(_eval_result),
    PlainSerializer(lambda r: r.to_dict(), return_type=dict[str, Any]),
]


class Candidate(BaseModel):
    """One candidate kernel of one round, from the coder's draft to the evaluator's verdict."""

    round: int
    index: int  # 1-based within the round: round_NN/cand_<index>/
    origin: Literal["llm", "fusion", "human"] = "llm"
    idea: str = ""
    source: str | None = None  # the file as the coder wrote it
    tuned_source: str | None = None  # the launch-constant sweep's winner, when it beat `source`
    tuned: dict[str, int] = Field(default_factory=dict)  # the constants the sweep chose
    status: CandidateStatus = "pending"
    rule: str | None = None
    summary: str = ""  # one line: EvalResult.summary() or why it was not evaluated
    problem: str = ""  # for no_code / static rejections: what the coder was told
    result: Verdict | None = None  # the judge's verdict on the final (tuned) source
    seed_result: Verdict | None = None  # the verdict on `source` when tuned_source replaced it
    duplicate_of: str | None = None  # "round_02/cand_1" when the source was seen before
    followup: bool = False  # the coder needed its one follow-up request
    eval_started: float | None = None  # epoch seconds: the tester's span, for the time budget
    eval_finished: float | None = None

    @property
    def key(self) -> str:
        return candidate_key(self.round, self.index)

    @property
    def final_source(self) -> str | None:
        return self.tuned_source or self.source

    @property
    def speedup_eager(self) -> float | None:
        return self.result.speedup_eager if self.result else None

    @property
    def speedup_compiled(self) -> float | None:
        return self.result.speedup_compiled if self.result else None

    def speedup_over(self, baseline: str) -> float | None:
        """Its speedup over the run's baseline (decisions.baseline_speedup's names)."""
        return baseline_speedup(self.speedup_eager, self.speedup_compiled, baseline)

    @property
    def roofline_fraction(self) -> float | None:
        roofline = self.result.roofline if self.result else None
        return roofline.fraction if roofline else None

    @property
    def timing_meaningful(self) -> bool:
        timings = self.result.timings if self.result else None
        return bool(timings and timings.meaningful)


class Usage(BaseModel):
    """LLM usage per agent (agents/llm/usage.py's AgentUsage); the run's total is their sum."""

    per_agent: dict[str, AgentUsage] = Field(default_factory=dict)
    # The ledger's remarks for the report ("no price known for model X: cost counted as 0").
    notes: list[str] = Field(default_factory=list)

    @property
    def total(self) -> AgentUsage:
        return sum(self.per_agent.values(), AgentUsage())

    @classmethod
    def of(cls, per_agent: Mapping[str, AgentUsage], notes: Sequence[str] = ()) -> Usage:
        """From a UsageLedger's by_agent() and notes."""
        return cls(per_agent=dict(per_agent), notes=list(notes))

    def to_dict(self) -> dict[str, Any]:
        """run.json's usage block: totals plus per_agent, and the notes."""
        return {
            **self.total.model_dump(),
            "per_agent": {k: v.model_dump() for k, v in sorted(self.per_agent.items())},
            "notes": list(self.notes),
        }


def add_usage(left: Usage | None, right: Usage | None) -> Usage:
    """Reducer: usage reported by concurrent nodes is summed per agent, never overwritten; each
    note is kept once."""
    left, right = left or Usage(), right or Usage()
    merged = dict(left.per_agent)
    for agent, u in right.per_agent.items():
        merged[agent] = merged.get(agent, AgentUsage()) + u
    notes = [*left.notes, *(n for n in right.notes if n not in left.notes)]
    return Usage(per_agent=merged, notes=notes)


class Budget(BaseModel):
    """Hard limits of a run; None means unlimited."""

    rounds: int
    tokens: int | None = None
    usd: float | None = None
    seconds: float | None = None

    @classmethod
    def of(cls, config: RunConfig) -> Budget:
        """The budget a run's config sets."""
        return cls(
            rounds=config.rounds,
            tokens=config.budget_tokens,
            usd=config.budget_usd,
            seconds=config.time_budget_s,
        )

    def exhausted(
        self, *, usage: Usage, elapsed_s: float, rounds_done: int | None = None
    ) -> tuple[StopReason, str] | None:
        """The budget that ran out and a sentence saying so, or None while all remain.

        Without `rounds_done` only tokens, cost and time are checked (before an LLM call).
        """
        total = usage.total
        if self.tokens is not None and total.total_tokens >= self.tokens:
            return "tokens", f"token budget spent: {total.total_tokens} of {self.tokens}"
        if self.usd is not None and total.cost_usd >= self.usd:
            return "cost", f"cost budget spent: ${total.cost_usd:.4f} of ${self.usd:.4f}"
        if self.seconds is not None and elapsed_s >= self.seconds:
            return "time", f"time budget spent: {elapsed_s:.0f} s of {self.seconds:.0f} s"
        if rounds_done is not None and rounds_done >= self.rounds:
            return "rounds", f"all {self.rounds} rounds done"
        return None


class RunState(TypedDict, total=False):
    """The state the graph checkpoints after every step."""

    run_id: str
    """The run's id: also the checkpointer's thread id and the run directory's name."""
    round: int
    """The current round, 1-based; 0 before the first plan."""
    profile: dict[str, Any]
    """Baselines (eager, torch.compile), roofline and the task's ops, from the profile node."""
    plans: Annotated[list[Plan], operator.add]
    """Every round's plan, appended; plans[-1] is the current one."""
    drafts: list[Candidate]
    """This round's candidates as the coder wrote them (replaced each round)."""
    candidates: Annotated[list[Candidate], operator.add]
    """Every evaluated candidate of every round, appended by the tester branches."""
    critiques: Annotated[list[Critique], operator.add]
    """Every round's critique, appended; critiques[-1] feeds the next round's coder."""
    usage: Annotated[Usage, add_usage]
    """LLM calls, tokens and cost per agent, summed across nodes."""
    elapsed_s: Annotated[float, operator.add]
    """Seconds spent in nodes, summed (the time budget's clock; a resume gap does not count)."""
    instruction: str
    """Chat mode: what the person asked for; the next plan and code follow it."""
    start_source: str
    """Chat mode: the person's own kernel (--from). Offline, round 1 evaluates it as given (no
    model could revise it); with a model, the instruction carries it to the coder instead."""
    stop_reason: StopReason | None
    """Set by the critic (or the human node) when the run stops."""
    stop_detail: str
    """A sentence on why it stopped, for the verdict."""


def duplicate_key(source: str) -> str:
    """Identity of a candidate file within a run, for spotting duplicates (whitespace at the ends
    ignored; the evaluator and the store key verdicts on sandbox.judge.pool.source_hash instead)."""
    return hashlib.sha256(source.strip().encode()).hexdigest()[:16]


def best_candidate(
    candidates: list[Candidate], *, timing_meaningful: bool, baseline: str = "fastest"
) -> Candidate | None:
    """The best verified candidate (status ok, with its source) that beat the reference, or None
    (the reference stays): decisions.winner over the verified ones, by their speedup over the
    run's baseline (the faster of eager and torch.compile unless --baseline says otherwise)."""
    verified = [c for c in candidates if c.status == "ok" and c.final_source]
    return winner(verified, lambda c: c.speedup_over(baseline), timing_meaningful=timing_meaningful)


def round_summaries(plans: list[Plan], candidates: list[Candidate]) -> list[dict[str, Any]]:
    """run.json's rounds: per round its plan, the statuses of its candidates, its best speedup."""
    out = []
    for number, plan in enumerate(plans, 1):
        ours = [c for c in candidates if c.round == number]
        statuses: dict[str, int] = {}
        for c in ours:
            statuses[c.status] = statuses.get(c.status, 0) + 1
        speedups = [c.speedup_eager for c in ours if c.status == "ok" and c.speedup_eager]
        out.append(
            {
                "round": number,
                "plan_summary": plan.summary,
                "best_speedup_eager": max(speedups) if speedups else None,
                "statuses": statuses,
            }
        )
    return out


def node_accounting(
    by_agent: dict[str, Any], started: float, now: float, notes: Sequence[str] = ()
) -> dict[str, Any]:
    """The state update every node adds: the LLM usage it caused (with its ledger's notes) and
    the seconds it took."""
    return {"usage": Usage.of(by_agent, notes), "elapsed_s": max(0.0, now - started)}


def llm_budget_spent(state: RunState, budget: Budget, extra: Usage | None = None) -> str | None:
    """Why no further LLM call may be made (tokens, cost or time spent), or None.

    `extra`: usage of the running node, not yet in the state.
    """
    usage = add_usage(state.get("usage"), extra)
    spent = budget.exhausted(usage=usage, elapsed_s=state.get("elapsed_s", 0.0))
    return spent[1] if spent else None


# The classes a checkpoint may revive: everything else in a checkpoint is plain data. (LangGraph
# allows any importable class by default, which would let a tampered checkpoint file run code.)
CHECKPOINT_TYPES: tuple[type[BaseModel], ...] = (
    Idea,
    Plan,
    Feedback,
    Critique,
    Candidate,
    AgentUsage,
    Usage,
)
