"""The coder: plan + feedback -> K candidate files (LLM calls in parallel, or fusion codegen)."""

from __future__ import annotations

import ast
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from ..run.rundir import KERNEL_PY
from ..sandbox import contract, rules
from ..sandbox.static.bounded import bounded_static_check
from ..sandbox.static.pyparse import parse
from .context import RunContext
from .llm import AgentUsage, ChatClient, ChatReply, LLMError, Section, UsageLedger
from .prompts import PROMPTS_DIR, load_prompt, prompt_part
from .state import (
    Budget,
    Candidate,
    Idea,
    Plan,
    RunState,
    best_candidate,
    duplicate_key,
    llm_budget_spent,
    node_accounting,
)
from .taskfacts import input_lines

# A reply's fenced blocks: ```python ... ``` (or ``` ... ```).
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
# Few-shot files in the coder's prompt: 2 examples of ~70 lines teach the format without
# crowding out the task (each costs ~1.5k tokens).
MAX_EXAMPLES = 2
# The candidate contract's import allowlist (sandbox/contract.py), as the prompt words it.
ALLOWED_IMPORTS = ", ".join(
    f"{name} ({note})" if note else name for name, (_, note) in contract.IMPORTS.items()
)


# -- reading replies ------------------------------------------------------------------------------
def pick_code(text: str) -> tuple[str | None, str]:
    """(the candidate file in a reply, or None; why none was taken).

    The last block that is a complete candidate (it parses, defines `class ModelNew` and
    launches a @triton.jit kernel) wins: a full file followed by a short "key change" excerpt
    is the full file. Without one, the largest block that parses and defines ModelNew (the
    evaluator's verdict on it tells the coder what is missing), else the last that mentions it.
    A code block left open (a cut-off reply) counts only when what follows its fence parses;
    bare text only when it parses as Python: prose is never taken for code.
    """
    blocks = [body for _, body in _FENCE.findall(text)]
    tail = _unclosed_block(text)
    candidates = [*blocks, *([tail] if tail is not None else [])]
    complete = [b for b in candidates if _is_candidate(b, complete=True)]
    if complete:
        return complete[-1].strip() + "\n", ""
    if not blocks and tail is None and _is_candidate(text, complete=False):
        return text.strip() + "\n", ""  # bare Python, no fences
    parsed = [b for b in candidates if _is_candidate(b, complete=False)]
    if parsed:
        return max(parsed, key=len).strip() + "\n", ""
    named = [b for b in blocks if "class ModelNew" in b]
    if named:
        return named[-1].strip() + "\n", ""
    if tail is not None and "class ModelNew" in tail:
        return None, (
            "your reply's code block is never closed and its code does not parse (was it cut "
            "off?); send the whole file in one ```python block, closed with ```"
        )
    return None, (
        "your reply has no ```python code block defining `class ModelNew`; send the whole "
        "file in one block"
    )


def extract_code(text: str) -> str | None:
    """The candidate file in a reply (see pick_code), else None."""
    return pick_code(text)[0]


def _unclosed_block(text: str) -> str | None:
    """What follows a fence that is never closed, or None when every fence is closed."""
    rest = _FENCE.sub("", text)
    opening = re.search(r"```[ \t]*[A-Za-z0-9_+-]*[^\n]*\n", rest)
    return rest[opening.end() :] if opening else None


def _is_candidate(source: str, *, complete: bool) -> bool:
    """Parses and defines a top-level ModelNew; `complete`: also a @triton.jit function and a
    launch (`kernel[grid](...)`)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    top = tree.body
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in top):
        return False
    if not complete:
        return True
    jitted = any(
        isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list)
        for n in top
    )
    launches = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for n in ast.walk(tree)
    )
    return jitted and launches


def source_problem(source: str | None, why_none: str = "") -> tuple[str | None, str | None]:
    """(rule, problem) that keeps `source` from the evaluator, or (None, None) when it may go.

    The static checks are the evaluator's own, bounded as the evaluator runs them (size, time
    and memory: sandbox/static/bounded.py), so a file rejected here would be rejected there; the
    coder
    gets the same line-by-line message.
    """
    if source is None:
        return "no-code", why_none or pick_code("")[1]
    violations = bounded_static_check(source)
    if not violations:
        return None, None
    return violations[0].rule, (
        "the evaluator's static checks reject the file:\n" + rules.format_violations(violations)
    )


# -- the prompt -----------------------------------------------------------------------------------
def rule_lines() -> list[tuple[str, str]]:
    """(rule id, what it forbids) for every static and sandbox rule, read from the evaluator
    itself so the prompt never goes stale."""
    return [*rules.RULES.items(), *rules.GUARD_RULES.items()]


def examples_for(task_source: str, task_name: str) -> list[dict[str, str]]:
    """Up to MAX_EXAMPLES accepted candidate files, those named after the task's ops first."""
    files = sorted((PROMPTS_DIR / "examples").glob("*.py"))
    text = f"{task_name}\n{task_source}".lower()

    def relevance(p: Path) -> tuple[int, int]:
        words = p.stem.lower().split("_")
        return (-sum(w in text for w in words), len(p.read_text()))

    chosen = sorted(files, key=relevance)[:MAX_EXAMPLES]
    return [{"name": p.stem, "source": p.read_text().strip()} for p in chosen]


def coder_messages(
    state: RunState, ctx: RunContext, plan: Plan, idea: Idea, index: int, count: int
) -> list[dict[str, Any]]:
    timing = (state.get("profile") or {}).get("timing_meaningful", False)
    best = best_candidate(
        state.get("candidates", []), timing_meaningful=timing, baseline=ctx.config.baseline
    )
    critiques = state.get("critiques", [])
    last = critiques[-1] if critiques else None
    prompt = load_prompt(
        "coder.j2",
        dtype=ctx.config.dtype,
        allowed_imports=ALLOWED_IMPORTS,
        rules=rule_lines(),
        example_files=examples_for(ctx.task.source, ctx.task.name),
        task_name=ctx.task.name,
        sizes=dict(ctx.task.sizes),
        task_source=ctx.task.source.strip(),
        inputs=input_lines(ctx.task, ctx.config.dtype),
        best_summary=best.summary if best else "",
        best_source=(best.final_source or "").strip() if best else "",
        critique_summary=last.summary if last else "",
        feedback_items=last.feedback if last else [],
        round=state["round"],
        index=index,
        count=count,
        plan_summary=plan.summary,
        fuse=", ".join(plan.fuse),
        precision=plan.precision,
        idea_title=idea.title,
        idea_approach=idea.approach,
        instruction=state.get("instruction", ""),
    )
    user: list[Section] = [Section(prompt_part(prompt, "task"))]
    if best is not None:
        user.append(Section(prompt_part(prompt, "best")))  # the current kernel: never trimmed
    if last is not None:
        user.append(Section(prompt_part(prompt, "feedback"), trim=1, label="feedback"))
    user.append(Section(prompt_part(prompt, "request")))
    system = [
        Section(prompt_part(prompt, "system")),
        Section(prompt_part(prompt, "examples"), trim=3, mode="drop", label="examples"),
    ]
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def followup_text(problem: str) -> str:
    return prompt_part(load_prompt("coder.j2", problem=problem), "followup")


# -- writing candidates ---------------------------------------------------------------------------
def transcript(messages: list[dict[str, Any]]) -> str:
    """prompt.md: every message as sent (fitted), under its role."""
    return "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages) + "\n"


def truncated_problem(reply: ChatReply) -> str:
    return (
        f"the reply was cut off at the output limit ({reply.max_tokens} tokens) before its code "
        f"block ended, even after {reply.continuations} continuation(s); raise "
        "--max-output-tokens (or --context-window, if the server allows more)"
    )


def llm_candidate(
    client: ChatClient, state: RunState, ctx: RunContext, plan: Plan, index: int
) -> Candidate:
    """One candidate from the LLM: a reply, and one follow-up naming the problem if needed.

    A reply cut off at the output limit gets no follow-up: the same request would be cut (and
    billed) again."""
    round_no, idea = state["round"], plan.ideas[index - 1]
    messages = coder_messages(state, ctx, plan, idea, index, len(plan.ideas))
    reply = client.chat(messages, agent="coder")
    replies: list[ChatReply] = [reply]
    source, why_none = pick_code(reply.text)
    rule, problem = source_problem(source, why_none)
    if reply.truncated and not (source and _is_candidate(source, complete=True)):
        source, rule, problem = None, "truncated", truncated_problem(reply)
    elif problem is not None:
        ctx.rundir.event("coder.followup", round=round_no, index=index, rule=rule, problem=problem)
        followup = [
            *messages,
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": followup_text(problem)},
        ]
        replies.append(client.chat(followup, agent="coder"))
        again, why_none = pick_code(replies[-1].text)
        if replies[-1].truncated and not (again and _is_candidate(again, complete=True)):
            again, why_none = None, truncated_problem(replies[-1])
        source = again or source
        rule, problem = source_problem(source, why_none)
        if source is None and replies[-1].truncated:
            rule = "truncated"
    write_llm_files(ctx, round_no, index, replies, source)
    if rule == "truncated":  # answered, and billed, but unusable: the report counts it so
        client.ledger.record("coder", AgentUsage(unusable=1))
    candidate = Candidate(
        round=round_no,
        index=index,
        origin="llm",
        idea=idea.title,
        source=source,
        problem=problem or "",
        followup=len(replies) > 1,
    )
    if source is not None:
        # Still failing the static checks after the follow-up, it goes to the evaluator anyway:
        # the pool rejects it statically (no worker, milliseconds) and the verdict is its own.
        return candidate
    summary = "no_code: " + (
        "the reply was cut off at the output limit"
        if rule == "truncated"
        else "no usable code block"
    )
    return candidate.model_copy(update={"status": "no_code", "rule": rule, "summary": summary})


def write_llm_files(
    ctx: RunContext, round_no: int, index: int, replies: list[ChatReply], source: str | None
) -> None:
    rd = ctx.rundir
    rd.write_candidate_file(round_no, index, "prompt.md", transcript(replies[-1].messages))
    text = "\n\n---\n\n".join(
        f"## reply {i + 1} ({r.model}{', cached' if r.cached else ''})\n\n{r.text}"
        for i, r in enumerate(replies)
    )
    rd.write_candidate_file(round_no, index, "reply.md", text + "\n")
    reasoning = reasoning_text(replies)
    if reasoning:  # split off the reply before it was read; kept for audit
        rd.write_candidate_file(round_no, index, "reasoning.md", reasoning)
    if source is not None:
        rd.write_candidate_file(round_no, index, KERNEL_PY, source)


def reasoning_text(replies: list[ChatReply]) -> str:
    """reasoning.md: each reply's reasoning (<think> blocks, reasoning_content), or ""."""
    parts = [
        f"## reply {i + 1} ({r.model})\n\n{r.reasoning}\n"
        for i, r in enumerate(replies)
        if r.reasoning
    ]
    return "\n".join(parts)


def fusion_candidate(state: RunState, ctx: RunContext, index: int, why: str) -> Candidate | None:
    """The fusion codegen's kernel as candidate `index`, or None when it has none."""
    fusion = (state.get("profile") or {}).get("fusion") or {}
    source = fusion.get("source")
    if not source:
        return None
    round_no, rd = state["round"], ctx.rundir
    note = f"No prompt: the deterministic fusion codegen (offline coder) wrote this file ({why}).\n"
    rd.write_candidate_file(round_no, index, "prompt.md", note)
    rd.write_candidate_file(round_no, index, "reply.md", f"fusion codegen: {fusion['reason']}\n")
    rd.write_candidate_file(round_no, index, KERNEL_PY, source)
    return Candidate(
        round=round_no, index=index, origin="fusion", idea="fusion codegen", source=source
    )


def person_candidate(state: RunState, ctx: RunContext) -> Candidate | None:
    """Round 1 offline with chat --from: the person's kernel as given, or None otherwise."""
    source = state.get("start_source")
    if not source or state["round"] != 1:
        return None
    rd = ctx.rundir
    note = "No prompt: the person's own kernel (chat --from), evaluated as given (no model).\n"
    rd.write_candidate_file(1, 1, "prompt.md", note)
    rd.write_candidate_file(1, 1, "reply.md", "the person's kernel (--from)\n")
    rd.write_candidate_file(1, 1, KERNEL_PY, source)
    return Candidate(round=1, index=1, origin="human", idea="your kernel (--from)", source=source)


def failed_candidate(round_no: int, index: int, idea: str, error: LLMError) -> Candidate:
    return Candidate(
        round=round_no,
        index=index,
        idea=idea,
        status="no_code",
        rule="llm-error",
        problem=str(error),
        summary=f"no candidate: the LLM call failed ({error.kind})",
    )


def mark_duplicates(drafts: list[Candidate], history: list[Candidate]) -> list[Candidate]:
    """Drafts whose source was already evaluated (or appears earlier this round) marked so.

    A re-evaluation would cost a full correctness check and teach nothing.
    """
    seen = {duplicate_key(c.source): c for c in history if c.source and c.status != "duplicate"}
    out = []
    for d in drafts:
        if d.status != "pending" or not d.source:
            out.append(d)
            continue
        earlier = seen.get(duplicate_key(d.source))
        if earlier is None:
            seen[duplicate_key(d.source)] = d
            out.append(d)
            continue
        same_round = earlier.round == d.round and earlier.status == "pending"
        update: dict[str, Any] = {
            "status": "duplicate",
            "duplicate_of": earlier.key,
            "summary": f"same source as {earlier.key}"
            + ("" if same_round else f" ({earlier.status})"),
        }
        if not same_round:
            update |= {"result": earlier.result, "rule": earlier.rule}
        out.append(d.model_copy(update=update))
    return out


def write_candidates(
    state: RunState, ctx: RunContext, client: ChatClient | None, note: str
) -> list[Candidate]:
    """This round's drafts: K LLM candidates in parallel, a fusion seed, or the fusion fallback."""
    plan: Plan = state["plans"][-1]
    round_no = state["round"]
    if client is None:
        mine = person_candidate(state, ctx)
        seed = mine or fusion_candidate(state, ctx, 1, note or "no model configured")
        return [seed] if seed else []
    with ThreadPoolExecutor(max_workers=len(plan.ideas)) as pool:
        futures = [
            pool.submit(llm_candidate, client, state, ctx, plan, i)
            for i in range(1, len(plan.ideas) + 1)
        ]
        drafts = []
        for i, future in enumerate(futures, 1):
            try:
                drafts.append(future.result())
            except LLMError as e:
                ctx.rundir.event(
                    "llm.fallback",
                    agent="coder",
                    round=round_no,
                    index=i,
                    kind=e.kind,
                    error=str(e),
                    circuit_open=e.circuit_open,
                )
                seed = fusion_candidate(state, ctx, i, f"the LLM failed: {e.kind}")
                drafts.append(seed or failed_candidate(round_no, i, plan.ideas[i - 1].title, e))
    if round_no == 1 and ctx.config.fusion_seed:
        seed = fusion_candidate(state, ctx, len(drafts) + 1, "seed candidate of round 1")
        drafts += [seed] if seed else []
    return drafts


def coder(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Node: write this round's candidates. Pending drafts go to the tester, the rest to history."""
    ctx, started, ledger = runtime.context, time.monotonic(), UsageLedger()
    client = ctx.client("coder", ledger)
    note = ""
    if client is not None and (note := llm_budget_spent(state, Budget.of(ctx.config)) or ""):
        client = None
    drafts = mark_duplicates(
        write_candidates(state, ctx, client, note), state.get("candidates", [])
    )
    for d in drafts:
        if d.status != "pending":
            ctx.rundir.event(
                "candidate.skipped",
                round=d.round,
                index=d.index,
                status=d.status,
                summary=d.summary,
            )
    return {
        "drafts": [d for d in drafts if d.status == "pending"],
        "candidates": [d for d in drafts if d.status != "pending"],
        **node_accounting(ledger.by_agent(), started, time.monotonic(), ledger.notes),
    }
