"""The tester: one candidate -> its EvalResult through the sandbox pool, plus a bounded sweep of
its `# tune:` launch constants when it is correct and timings mean something. No LLM."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future
from typing import Any

from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from ..codegen.tunables import tune_constants, with_values
from ..decisions import is_better
from ..run.rundir import RESULT_JSON, TUNED_PY, TUNED_RESULT_JSON
from ..sandbox.results import EvalResult
from .context import RunContext, lookup_verdict, record_candidate, remember_verdict
from .state import Candidate

# A variant must beat the current choice by 1% in speedup: interleaved timing spreads on a quiet
# GPU are ~0.5%, so smaller gains are noise that would churn the constants.
TUNE_MIN_GAIN = 0.01


class TesterInput(TypedDict):
    """What a Send gives one tester branch: the candidate to evaluate."""

    candidate: Candidate


def median_ms(result: EvalResult) -> float | None:
    timings = result.timings
    if not result.ok or timings is None or not timings.meaningful or timings.candidate is None:
        return None
    return timings.candidate.median_ms


def speed(result: EvalResult) -> float | None:
    """How fast a verified result is: its speedup over eager, timed interleaved with eager in the
    same evaluation, so clock and thermal drift between two evaluations cancel out."""
    if median_ms(result) is None:
        return None
    return result.speedup_eager or 1.0 / median_ms(result)


def sweep(
    ctx: RunContext, source: str, result: EvalResult, limit: int
) -> tuple[str, EvalResult, list[dict[str, Any]]]:
    """Coordinate descent over the tunables, at most `limit` extra evaluations.

    One constant at a time, all its other values evaluated concurrently, the fastest verified one
    kept if its speedup gains more than TUNE_MIN_GAIN. Returns (best source, its result, trials).
    """
    best_src, best_res, trials = source, result, []
    budget = limit
    for name in [t.name for t in tune_constants(source)]:
        current = {t.name: t for t in tune_constants(best_src)}[name]
        options = [v for v in current.options if v != current.value][:budget]
        if not options:
            continue
        budget -= len(options)
        variants = [with_values(best_src, {name: v}) for v in options]
        futures: list[Future] = [verdict_future(ctx, v)[0] for v in variants]
        for value, variant, future in zip(options, variants, futures):
            res = judged(ctx, future)
            trials.append({name: value, "status": res.status, "median_ms": median_ms(res)})
            if is_better(speed(res), speed(best_res), margin=TUNE_MIN_GAIN):
                best_src, best_res = variant, res
        if budget <= 0:
            break
    return best_src, best_res, trials


def should_sweep(ctx: RunContext, source: str, result: EvalResult) -> str | None:
    """Why no sweep runs for this candidate, or None when it should."""
    if not ctx.config.tune or ctx.config.tune_limit <= 0:
        return "tuning is off"
    if not result.ok:
        return "the candidate is not verified"
    if median_ms(result) is None:
        return "timings are not meaningful here (Triton interpreter)"
    if not tune_constants(source):
        return "the file has no `# tune:` constants"
    return None


def verdict_future(ctx: RunContext, source: str) -> tuple[Future, bool]:
    """(future verdict on `source`, whether it came from the store): the store's verdict when it
    judged this exact file on this task, environment and config before, else a new evaluation."""
    hit = lookup_verdict(ctx, source)
    if hit is None:
        return ctx.pool.submit(ctx.task, source, ctx.eval_config), False
    done: Future = Future()
    done.set_result(hit)
    return done, True


def judged(ctx: RunContext, future: Future) -> EvalResult:
    """A verdict, cached in the store when it is new and the candidate's own."""
    result: EvalResult = future.result()
    remember_verdict(ctx, result)
    return result


def evaluate_candidate(ctx: RunContext, cand: Candidate) -> Candidate:
    """The candidate with its verdict (and tuned source), result files written."""
    rd, source = ctx.rundir, cand.source or ""
    rd.event("candidate.evaluating", round=cand.round, index=cand.index, origin=cand.origin)
    future, cached = verdict_future(ctx, source)
    result = judged(ctx, future)
    rd.write_candidate_file(cand.round, cand.index, RESULT_JSON, result.to_json(indent=2) + "\n")
    rd.event(
        "candidate.evaluated",
        round=cand.round,
        index=cand.index,
        status=result.status,
        rule=result.rule,
        summary=result.summary(),
        speedup_eager=result.speedup_eager,
        cached=cached,
    )
    tuned_source, tuned, seed_result = None, {}, result
    if (skip := should_sweep(ctx, source, result)) is None:
        best_src, best_res, trials = sweep(ctx, source, result, ctx.config.tune_limit)
        rd.write_candidate_file(cand.round, cand.index, "sweep.json", _sweep_json(trials))
        improved: dict[str, Any] = {}
        if best_src != source:
            tuned_source, result = best_src, best_res
            tuned = {t.name: t.value for t in tune_constants(best_src)}
            seed = {t.name: t.value for t in tune_constants(source)}
            rd.write_candidate_file(cand.round, cand.index, TUNED_PY, best_src)
            rd.write_candidate_file(
                cand.round, cand.index, TUNED_RESULT_JSON, best_res.to_json(indent=2) + "\n"
            )
            # The progress line and the live view show the verdict that now stands for this
            # candidate: without it the log's last figure is the seed's, the report's the sweep's.
            improved = {
                "changed": {k: v for k, v in tuned.items() if seed.get(k) != v},
                "summary": result.summary(),
                "speedup_eager": result.speedup_eager,
            }
        rd.event(
            "candidate.tuned",
            round=cand.round,
            index=cand.index,
            trials=len(trials),
            chose=tuned,
            **improved,
        )
    elif result.ok:
        rd.event("candidate.tune_skipped", round=cand.round, index=cand.index, why=skip)
    record_candidate(ctx, cand, tuned_source or source, result, cached=cached)
    return cand.model_copy(
        update={
            "status": result.status,
            "rule": result.rule,
            "summary": result.summary(),
            "result": result,
            "tuned_source": tuned_source,
            "tuned": tuned,
            "seed_result": seed_result if tuned_source is not None else None,
        }
    )


def _sweep_json(trials: list[dict[str, Any]]) -> str:
    return json.dumps(trials, indent=2) + "\n"


def tester(inp: TesterInput, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Node (one Send branch per candidate): evaluate it; branches run concurrently."""
    started = time.time()
    tested = evaluate_candidate(runtime.context, inp["candidate"])
    # Branches overlap, so they do not add to elapsed_s: the critic adds the round's span
    # (first start to last finish) from these two stamps.
    span = {"eval_started": started, "eval_finished": time.time()}
    return {"candidates": [tested.model_copy(update=span)]}
