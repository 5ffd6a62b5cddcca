"""The profile node (baselines, roofline, fusion analysis) and the planner: profile -> Plan."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from langgraph.runtime import Runtime

from ..codegen import generate
from ..run.rundir import PLAN_JSON
from ..sandbox import baseline
from .context import RunContext
from .llm import LLMError, Section, UsageLedger
from .prompts import load_prompt, prompt_part
from .state import (
    Budget,
    Candidate,
    Critique,
    Idea,
    Plan,
    RunState,
    best_candidate,
    llm_budget_spent,
    node_accounting,
    round_summaries,
)
from .taskfacts import input_lines

# The rule planner's repertoire, tried in turn (round r starts at idea r-1) so successive rounds
# cover different directions instead of repeating the first one.
RULE_IDEAS = (
    Idea(
        title="one fused kernel",
        approach="Fuse the whole forward into one Triton kernel: each program reads its block of "
        "every input once and writes its block of the output once, fp32 arithmetic, masked "
        "tails; BLOCK_SIZE a power of two with a `# tune:` list.",
    ),
    Idea(
        title="one program per row",
        approach="One program per row (or output tile) so that reductions stay in registers; "
        "loop over column blocks when a row is longer than one block; int64 offsets.",
    ),
    Idea(
        title="bigger tiles",
        approach="Each program handles a 2-D tile (several rows) to amortise index math and "
        "launch cost; BLOCK sizes and NUM_WARPS as module constants with `# tune:` lists.",
    ),
    Idea(
        title="library op plus fused epilogue",
        approach="Keep a matmul or convolution in torch (cuBLAS/cuDNN are hard to beat) and fuse "
        "every elementwise op and reduction after it into one Triton epilogue kernel.",
    ),
)


# -- profile --------------------------------------------------------------------------------------
def fusion_seed(ctx: RunContext) -> dict[str, Any]:
    """The fusion codegen's kernel for the task: {source|None, reason, groups, tunables}."""
    try:
        result = generate(ctx.task, dtype=ctx.config.dtype)
    except Exception as e:  # a codegen bug must cost the run its seed candidate, not the run
        ctx.rundir.event("fusion.error", error=f"{type(e).__name__}: {e}")
        return {"source": None, "reason": f"fusion codegen failed: {type(e).__name__}: {e}"}
    return {
        "source": result.source,
        "reason": result.reason,
        "groups": list(result.groups),
        "tunables": {name: list(values) for name, values in result.tunables.items()},
    }


def profile_of(base: Any, ctx: RunContext) -> dict[str, Any]:
    """The profile the planner reads: baselines, roofline and whether times mean anything."""
    timings, roof = base.timings, base.roofline
    meaningful = bool(timings and timings.meaningful) and not ctx.interpreter
    return {
        "baseline_status": base.status,
        "baseline_message": base.message,
        "timing_meaningful": meaningful,
        "timing_note": timings.note if timings else "",
        "eager_ms": timings.eager.median_ms if timings and timings.eager else None,
        "compiled_ms": timings.compiled.median_ms if timings and timings.compiled else None,
        "compiled_error": timings.compiled_error if timings else None,
        "roofline_ms": (roof.policy_ms or roof.bound_ms) if roof else None,
        "limiter": roof.limiter if roof else None,
        "ops": [dataclasses.asdict(o) for o in getattr(base, "ops", ())],
        "ops_note": getattr(base, "ops_note", ""),
        "setup_s": dict(getattr(base, "setup_s", {}) or {}),
        "environment": dataclasses.asdict(base.environment),
        "sizes": dict(ctx.task.sizes),
        "dtype": ctx.config.dtype,
    }


def profile(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Node: time the reference (eager, torch.compile), its roofline, and the fusion analysis."""
    ctx, started = runtime.context, time.monotonic()
    base = baseline(ctx.task, ctx.eval_config, pool=ctx.pool)
    prof = profile_of(base, ctx)
    if base.task_error:  # every candidate would fail the same way: the task needs fixing
        ctx.rundir.update_run(profile=prof)
        ctx.rundir.event("profile", summary=profile_line(prof))
        first = (base.message.strip().splitlines() or ["the reference failed"])[0]
        detail = f"{first}; fix the task file (its Model, get_inputs or get_init_inputs)"
        ctx.rundir.event("stop", round=0, reason="task-error", detail=detail)
        return {
            "profile": prof,
            "round": 0,
            "stop_reason": "task-error",
            "stop_detail": detail,
            **node_accounting({}, started, time.monotonic()),
        }
    prof["fusion"] = fusion_seed(ctx)
    ctx.rundir.update_run(profile={k: v for k, v in prof.items() if k != "fusion"})
    ctx.rundir.event("profile", summary=profile_line(prof), fusion=prof["fusion"]["reason"])
    return {"profile": prof, "round": 0, **node_accounting({}, started, time.monotonic())}


def profile_line(prof: dict[str, Any]) -> str:
    if prof["baseline_status"] != "ok":
        first = (prof["baseline_message"].strip().splitlines() or [""])[0]
        return f"the reference failed ({prof['baseline_status']}): {first}"
    if not prof["timing_meaningful"]:
        return "reference ok; no meaningful timings here (Triton interpreter, correctness only)"
    parts = [f"eager {prof['eager_ms']:.4g} ms"]
    if prof["compiled_ms"]:
        parts.append(f"torch.compile {prof['compiled_ms']:.4g} ms")
    if prof["roofline_ms"]:
        parts.append(f"roofline {prof['roofline_ms']:.3g} ms ({prof['limiter']}-bound)")
    return ", ".join(parts)


def ops_lines(prof: dict[str, Any]) -> list[str]:
    """The reference's ops for the prompt: names and calls, and on a GPU each one's share of
    the time rounded to 5% (exact times would change every run and defeat the reply cache)."""
    lines = []
    for op in prof.get("ops") or []:
        line = f"{op['name']} x{op['calls']}"
        if prof.get("timing_meaningful"):
            line += f": ~{round(op['share'] * 20) * 5}% of the time"
        lines.append(line)
    return lines


# -- planning -------------------------------------------------------------------------------------
def candidates_wanted(ctx: RunContext) -> int:
    """The offline coder is deterministic: more than one candidate per round would repeat it."""
    return ctx.config.candidates if ctx.online("coder") else 1


def rules_plan(state: RunState, count: int) -> Plan:
    """A plan from the history alone: fix what failed, else try the next direction."""
    round_no = state.get("round", 0) + 1
    last = [c for c in state.get("candidates", []) if c.round == round_no - 1]
    failed = {c.status for c in last} - {"ok"}
    if not last:
        why = "start with the most direct fusion so that the first round yields a verified kernel"
    elif not any(c.status == "ok" for c in last):
        kinds = ", ".join(sorted(failed))
        why = f"last round had no verified kernel ({kinds}): fix those errors with simpler code"
    else:
        why = "last round verified a kernel: keep it correct and push memory traffic down"
    start = (round_no - 1) % len(RULE_IDEAS)
    ideas = [RULE_IDEAS[(start + i) % len(RULE_IDEAS)] for i in range(count)]
    fusion = (state.get("profile") or {}).get("fusion") or {}
    fuse = [str(g) for g in fusion.get("groups") or []][:8]
    return Plan(summary=f"Round {round_no}: {why}.", fuse=fuse, ideas=ideas)


def planner_messages(state: RunState, ctx: RunContext, count: int) -> list[dict[str, Any]]:
    prof = state.get("profile") or {}
    critiques: list[Critique] = state.get("critiques", [])
    candidates: list[Candidate] = state.get("candidates", [])
    best = best_candidate(
        candidates,
        timing_meaningful=prof.get("timing_meaningful", False),
        baseline=ctx.config.baseline,
    )
    rounds = [
        {
            "round": r["round"],
            "plan": r["plan_summary"],
            "statuses": r["statuses"],
            "best": f"{r['best_speedup_eager']:.2f}x" if r["best_speedup_eager"] else "",
        }
        for r in round_summaries(state.get("plans", []), candidates)
    ]
    prompt = load_prompt(
        "planner.j2",
        dtype=ctx.config.dtype,
        task_name=ctx.task.name,
        sizes=dict(ctx.task.sizes),
        task_source=ctx.task.source,
        inputs=input_lines(ctx.task, ctx.config.dtype),
        timing_meaningful=prof.get("timing_meaningful", False),
        eager_ms=_ms(prof.get("eager_ms")),
        compiled_ms=_ms(prof.get("compiled_ms")),
        roofline_ms=_ms(prof.get("roofline_ms")),
        limiter=prof.get("limiter"),
        fusion_groups=(prof.get("fusion") or {}).get("groups"),
        ops=ops_lines(prof),
        rounds=rounds,
        critique=critiques[-1].summary if critiques else "",
        best_summary=f"{best.key}: {best.summary}" if best else "",
        instruction=state.get("instruction", ""),
        round=state.get("round", 0) + 1,
        candidates=count,
    )
    user = [
        Section(prompt_part(prompt, "task")),
        Section(prompt_part(prompt, "profile"), trim=1, label="profile"),
        Section(prompt_part(prompt, "history"), trim=2, mode="tail", label="history"),
        Section(prompt_part(prompt, "request")),
    ]
    return [
        {"role": "system", "content": prompt_part(prompt, "system")},
        {"role": "user", "content": user},
    ]


def _ms(value: float | None) -> str:
    """Two significant digits: run-to-run noise then rarely changes the prompt (cache hits)."""
    return f"{value:.2g}" if value else "n/a"


def planner(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Node: decide what this round tries (LLM, or rules when offline, over budget or failing)."""
    ctx, started, ledger = runtime.context, time.monotonic(), UsageLedger()
    round_no, count = state.get("round", 0) + 1, candidates_wanted(runtime.context)
    client, source, note = ctx.client("planner", ledger), "rules", ""
    plan = None
    if client is not None and (note := llm_budget_spent(state, Budget.of(ctx.config)) or ""):
        client = None
    if client is not None:
        try:
            plan, reply = client.structured(
                planner_messages(state, ctx, count), Plan, agent="planner"
            )
            plan.ideas = plan.ideas[:count]
            source = "llm"
            if reply.reasoning:  # split off before the JSON was read; kept for audit
                ctx.rundir.write_round_file(round_no, "planner_reasoning.md", reply.reasoning)
        except LLMError as e:
            note = str(e)
            ctx.rundir.event(
                "llm.fallback",
                agent="planner",
                round=round_no,
                kind=e.kind,
                error=note,
                circuit_open=e.circuit_open,
            )
    if plan is None:
        plan = rules_plan(state, count)
    ctx.rundir.write_round_json(
        round_no,
        PLAN_JSON,
        {"round": round_no, "source": source, "note": note, **plan.model_dump()},
    )
    ctx.rundir.event(
        "plan", round=round_no, source=source, summary=plan.summary, ideas=len(plan.ideas)
    )
    return {
        "round": round_no,
        "plans": [plan],
        **node_accounting(ledger.by_agent(), started, time.monotonic(), ledger.notes),
    }
