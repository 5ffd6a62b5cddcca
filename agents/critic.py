"""The critic: a round's EvalResults -> feedback the coder can act on, and continue/stop.

The stop rules (budgets, roofline, patience, an exhausted offline coder) are decided here by
code; an LLM critic adds judgement on top (it may stop early once a verified kernel exists).
"""

from __future__ import annotations

import re
import time
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from ..sandbox.results import EvalResult, fault_of
from .context import RunContext
from .llm import LLMError, Section, UsageLedger
from .prompts import load_prompt, prompt_part
from .state import (
    Budget,
    Candidate,
    Critique,
    Feedback,
    RunState,
    StopReason,
    Usage,
    add_usage,
    best_candidate,
    llm_budget_spent,
    node_accounting,
)
from .taskfacts import input_lines

# What the coder should do about each evaluator rule, in one line (static rules get their own
# message from the evaluator already).
RULE_FIXES = {
    "shape": "return a tensor with exactly the reference output's shape",
    "dtype": "return the reference's dtype: cast the result with .to(x.dtype) before storing",
    "device": "allocate the output on the input's device",
    "nan": "masked loads need a neutral `other=` (0 for sums, -inf for max) and no division "
    "by masked lanes",
    "precision": "accumulate in fp32 and keep fp32 math: the error vs float64 is above what "
    "PyTorch itself makes",
    "variant": "sizes are hard-coded: read every size from the tensors' shapes and mask the "
    "tails, since the evaluator also runs a second shape",
    "drift": "the output changes over repeated calls: keep no state between calls and write "
    "every output element on every call",
    "alias": "allocate a fresh output (torch.empty) instead of returning or viewing an input",
    "reuse": "allocate the output inside forward on every call, never cache it",
    "input-mutation": "never write to an input tensor: load it, compute, store into the output",
    "no-triton-launch": "forward must launch one of the file's @triton.jit kernels",
    "signature": "ModelNew.__init__ must take exactly Model.__init__'s arguments",
    "parameters": "create parameters with the same names and shapes as Model's "
    "(e.g. self.weight = nn.Parameter(...) as in Model)",
    "roofline": "the measured time is below the physical bound: the kernel does not do the work",
}
_LINE_REF = re.compile(r'File "[^"]*(?:candidate|kernel)[^"]*", line (\d+)|\bat (\d+):(\d+):')


def first_error_line(message: str) -> str:
    """The line of an error text that names the error (the last 'Error:' line, else the first)."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    named = [ln for ln in lines if re.search(r"\w+(Error|Exception)\b", ln)]
    return (named[-1] if named else lines[0] if lines else "")[:300]


def error_location(message: str, source: str | None) -> str:
    """' at line N: `code`' when the error text points into the candidate file."""
    match = _LINE_REF.search(message)
    if not match or not source:
        return ""
    if match.group(1):
        number = int(match.group(1))
        lines = source.splitlines()
        if 0 < number <= len(lines):
            return f" at line {number}: `{lines[number - 1].strip()}`"
        return f" at line {number}"
    return f" at {match.group(2)}:{match.group(3)} of the kernel function"


def _one_digit(x: float) -> str:
    return f"{x:.0e}" if x and (abs(x) < 1e-3 or abs(x) >= 1e4) else f"{float(f'{x:.1g}'):g}"


def mismatch_pattern(result: EvalResult | None) -> str:
    """How the output differs: how many elements, how far, where.

    Inputs are drawn from fresh random seeds on every evaluation, so exact counts and values
    change from run to run; they are rounded here (count to 10%, error to one digit) so that a
    repeated run builds the same prompts and replays from the response cache.
    """
    mm = result.correctness.mismatch if result and result.correctness else None
    if mm is None:
        rule, status = (result.rule, result.status) if result else (None, None)
        return f"[{rule}] {status}"
    count, total = mm.count, mm.total
    head = f"{mm.output}: "
    err = f"max abs err ~{_one_digit(mm.max_abs_err)}"
    if count == total:
        return head + f"every element differs ({err}): the formula or the indexing is off"
    if count <= max(1, total // 64):
        where = ", ".join(str(list(idx)) for idx, _, _ in mm.first_bad[:3])
        return head + (
            f"a few of {total} elements differ ({err}), first at {where}: typically block "
            "tails or boundaries (masks, offsets)"
        )
    share = max(10, round(100 * count / total, -1))
    return head + f"about {share:.0f}% of {total} elements differ ({err})"


def prompt_summary(c: Candidate) -> str:
    """The verdict line prompts show: stable across runs (see mismatch_pattern)."""
    if c.status == "incorrect":
        return f"incorrect [{c.rule}]: " + mismatch_pattern(c.result)
    return c.summary


def performance_note(c: Candidate, profile: dict[str, Any]) -> tuple[str, str]:
    """(problem, fix) for a verified candidate: the roofline gap and register spills."""
    kernels = c.result.kernels if c.result else ()
    if not c.timing_meaningful:
        return (
            "verified (correctness only: no meaningful timings on this machine)",
            "keep it correct; cut memory passes (one read per input, one write per output)",
        )
    spills = [k for k in kernels if (k.spills or 0) > 0]
    frac, limiter = c.roofline_fraction, profile.get("limiter") or "memory"
    problem = f"{c.speedup_eager or 0:.2f}x vs eager"
    if c.speedup_compiled:
        problem += f", {c.speedup_compiled:.2f}x vs torch.compile"
    if frac is not None:
        problem += f", {frac:.0%} of the {limiter}-bound roofline"
    if spills:
        k = spills[0]
        return (
            problem + f"; kernel {k.name} spills {k.spills} registers",
            "use a smaller BLOCK_SIZE or fewer values per thread so that nothing spills",
        )
    if limiter == "memory":
        fix = "fewer bytes: fuse more ops, read each input once, wider vector loads, bigger tiles"
    else:
        fix = "more math throughput: tl.dot on tiles, larger tiles, more stages for pipelining"
    return problem, fix


def rule_feedback(c: Candidate, profile: dict[str, Any]) -> Feedback:
    """Actionable feedback on one candidate from its verdict alone."""
    status = c.status
    message = (c.result.message if c.result else "") or c.problem
    if status == "ok":
        problem, fix = performance_note(c, profile)
    elif status in ("compile_error", "runtime_error"):
        kind = status.replace("_", " ")
        problem = f"{kind}{error_location(message, c.source)}: {first_error_line(message)}"
        fix = "fix that line; block sizes must be tl.constexpr powers of two, loads masked"
    elif status == "incorrect":
        problem = prompt_summary(c)
        fix = RULE_FIXES.get(
            c.rule or "", "compare the kernel's math with Model.forward step by step"
        )
    elif status == "rejected":
        problem = f"rejected by rule `{c.rule}`: {first_error_line(message)}"
        fix = RULE_FIXES.get(c.rule or "", "remove the construct the rule names")
    elif status == "timeout":
        problem = f"timed out ({c.rule}): {first_error_line(message)}"
        fix = "make every loop bound finite and the grid proportional to the output size"
    elif fault_of(status, c.rule) == "evaluator":
        problem = f"not judged: the evaluator failed ({c.rule}), not the candidate"
        fix = "nothing in the kernel is known to be wrong: keep the approach"
    elif status == "crashed":
        problem = f"the worker crashed ({c.rule}): {first_error_line(message)}"
        fix = "an out-of-bounds access is likely: mask every load and store, use int64 offsets"
    elif status == "duplicate":
        problem = f"the same file as {c.duplicate_of}: nothing new was tried"
        fix = "change the approach, not just the comments"
    else:  # no_code or a static rejection before evaluation
        problem = c.problem or c.summary
        fix = "send the complete file in one ```python block, within the rules"
    return Feedback(candidate=c.index, problem=problem[:600], fix=fix)


def rules_critique(round_no: int, cands: list[Candidate], profile: dict[str, Any]) -> Critique:
    counts: dict[str, int] = {}
    for c in cands:
        counts[c.status] = counts.get(c.status, 0) + 1
    told = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no candidate"
    return Critique(
        summary=f"Round {round_no}: {told}.",
        feedback=[rule_feedback(c, profile) for c in cands],
        verdict="continue",
        reason="the stop rules decide (budgets, patience, roofline)",
    )


# -- convergence ----------------------------------------------------------------------------------
def score(c: Candidate, meaningful: bool) -> float:
    """What 'better' means: speedup over eager, or (interpreter) merely being verified."""
    return (c.speedup_eager or 0.0) if meaningful else 1.0


def last_improvement(cands: list[Candidate], margin: float, meaningful: bool) -> int | None:
    """The round in which the best verified score last grew by more than `margin`, or None."""
    best, when = None, None
    for number in sorted({c.round for c in cands}):
        ok = [score(c, meaningful) for c in cands if c.round == number and c.status == "ok"]
        top = max(ok, default=None)
        if top is not None and (best is None or top > best * (1 + margin)):
            best, when = top, number
    return when


def stop_decision(
    state: RunState, ctx: RunContext, usage: Usage, elapsed_s: float, verdict: Critique
) -> tuple[StopReason, str] | None:
    """Why the run stops after this round, or None to go on."""
    cfg, round_no = ctx.config, state["round"]
    cands: list[Candidate] = state.get("candidates", [])
    meaningful = (state.get("profile") or {}).get("timing_meaningful", False)
    best = best_candidate(cands, timing_meaningful=meaningful, baseline=ctx.config.baseline)
    spent = Budget.of(cfg).exhausted(usage=usage, elapsed_s=elapsed_s, rounds_done=round_no)
    if cfg.chat:  # the person decides, within the money and time budgets
        return spent if spent and spent[0] != "rounds" else None
    if spent:
        return spent
    if best and meaningful and (best.roofline_fraction or 0.0) >= cfg.roofline_target:
        frac = best.roofline_fraction or 0.0
        return "roofline", f"{best.key} reached {frac:.0%} of the roofline"
    if not ctx.online("coder"):
        if not any(c.result for c in cands):
            reason = ((state.get("profile") or {}).get("fusion") or {}).get("reason", "")
            return "no-candidate", f"the offline coder produced no candidate: {reason}"
        return "exhausted", "the offline coder (fusion codegen) has nothing new to try"
    improved = last_improvement(cands, cfg.margin, meaningful)
    if improved is not None and round_no - improved >= cfg.patience:
        return "patience", (
            f"no better verified kernel for {round_no - improved} round(s) since round {improved}"
        )
    if verdict.verdict == "stop" and best is not None:
        return "critic", verdict.reason or "the critic judged further rounds unlikely to help"
    return None


# -- the node -------------------------------------------------------------------------------------
def candidate_details(c: Candidate) -> str:
    message = (c.result.message if c.result else "") or c.problem
    parts = []
    if c.status not in ("ok", "duplicate", "incorrect") and message:
        parts.append(message)
    for k in c.result.kernels if c.result else ():
        parts.append(
            f"kernel {k.name}: registers {k.registers}, spills {k.spills}, "
            f"warps {k.num_warps}, stages {k.num_stages}"
        )
    return "\n".join(parts)


def critic_messages(
    state: RunState, ctx: RunContext, cands: list[Candidate], rules: Critique
) -> list[dict[str, Any]]:
    meaningful = (state.get("profile") or {}).get("timing_meaningful", False)
    best = best_candidate(
        state.get("candidates", []), timing_meaningful=meaningful, baseline=ctx.config.baseline
    )
    prompt = load_prompt(
        "critic.j2",
        task_name=ctx.task.name,
        dtype=ctx.config.dtype,
        sizes=dict(ctx.task.sizes),
        task_source=ctx.task.source.strip(),
        inputs=input_lines(ctx.task, ctx.config.dtype),
        round=state["round"],
        plan=state["plans"][-1].summary,
        candidates=[
            {
                "index": c.index,
                "idea": c.idea,
                "summary": prompt_summary(c),
                "details": candidate_details(c),
            }
            for c in cands
        ],
        rule_feedback=rules.feedback,
        best_summary=f"{best.key}: {best.summary}" if best else "",
        rounds_left=max(0, ctx.config.rounds - state["round"]),
    )
    user = [
        Section(prompt_part(prompt, "task")),
        Section(prompt_part(prompt, "results"), trim=1, label="results"),
        Section(prompt_part(prompt, "analysis"), trim=2, label="rule analysis"),
        Section(prompt_part(prompt, "request")),
    ]
    return [
        {"role": "system", "content": prompt_part(prompt, "system")},
        {"role": "user", "content": user},
    ]


def tester_span(cands: list[Candidate]) -> float:
    """Wall seconds of a round's evaluations: first start to last finish (branches overlap)."""
    spans = [(c.eval_started, c.eval_finished) for c in cands if c.eval_started and c.eval_finished]
    if not spans:
        return 0.0
    return max(e for _, e in spans) - min(s for s, _ in spans)


def critique_round(
    state: RunState, ctx: RunContext, cands: list[Candidate], ledger: UsageLedger
) -> tuple[Critique, str]:
    """(critique, source): the LLM's when it answers, else the rules'."""
    rules = rules_critique(state["round"], cands, state.get("profile") or {})
    client = ctx.client("critic", ledger)
    if client is None or not cands or llm_budget_spent(state, Budget.of(ctx.config)):
        return rules, "rules"
    try:
        crit, reply = client.structured(
            critic_messages(state, ctx, cands, rules), Critique, agent="critic"
        )
    except LLMError as e:
        ctx.rundir.event(
            "llm.fallback",
            agent="critic",
            round=state["round"],
            kind=e.kind,
            error=str(e),
            circuit_open=e.circuit_open,
        )
        return rules, "rules"
    if reply.reasoning:  # split off before the JSON was read; kept for audit
        ctx.rundir.write_round_file(state["round"], "critic_reasoning.md", reply.reasoning)
    if not crit.feedback:  # a verdict without feedback leaves the coder blind: add the rules'
        crit = crit.model_copy(update={"feedback": rules.feedback})
    return crit, "llm"


def critic(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Node: explain this round's results and decide whether the run goes on."""
    ctx, started, ledger = runtime.context, time.monotonic(), UsageLedger()
    round_no = state["round"]
    cands = sorted(
        (c for c in state.get("candidates", []) if c.round == round_no), key=lambda c: c.index
    )
    crit, source = critique_round(state, ctx, cands, ledger)
    accounting = node_accounting(ledger.by_agent(), started, time.monotonic(), ledger.notes)
    accounting["elapsed_s"] += tester_span(cands)
    usage = add_usage(state.get("usage"), accounting["usage"])
    elapsed = state.get("elapsed_s", 0.0) + accounting["elapsed_s"]
    stop = stop_decision(state, ctx, usage, elapsed, crit)
    ctx.rundir.write_round_json(
        round_no, "critique.json", {"round": round_no, "source": source, **crit.model_dump()}
    )
    ctx.rundir.event(
        "critique", round=round_no, source=source, summary=crit.summary, verdict=crit.verdict
    )
    update: dict[str, Any] = {"critiques": [crit], **accounting}
    if stop is not None:
        ctx.rundir.event("stop", round=round_no, reason=stop[0], detail=stop[1])
        update |= {"stop_reason": stop[0], "stop_detail": stop[1]}
    return update


def human(state: RunState, runtime: Runtime[RunContext]) -> Command[Literal["planner", "finalize"]]:
    """Node (chat mode): wait for the person's next instruction; '/quit' or nothing ends it."""
    ctx = runtime.context
    critiques = state.get("critiques", [])
    meaningful = (state.get("profile") or {}).get("timing_meaningful", False)
    best = best_candidate(
        state.get("candidates", []), timing_meaningful=meaningful, baseline=ctx.config.baseline
    )
    answer = interrupt(
        {
            "round": state.get("round", 0),
            "critique": critiques[-1].summary if critiques else "",
            "best": f"{best.key}: {best.summary}" if best else None,
        }
    )
    text = str(answer or "").strip()
    if text in ("", "/quit", "/stop"):
        runtime.context.rundir.event("stop", reason="user", detail="the person ended the session")
        return Command(
            goto="finalize", update={"stop_reason": "user", "stop_detail": "ended by the person"}
        )
    runtime.context.rundir.event("instruction", round=state.get("round", 0), text=text)
    return Command(goto="planner", update={"instruction": text})
