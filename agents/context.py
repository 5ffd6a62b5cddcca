"""RunContext: what the graph's nodes need besides the state (LangGraph's runtime context), and
the verdict cache the tester reads through it."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..run.config import OFFLINE, ROLES, Role, RunConfig, eval_config_for
from ..run.records import record_start, task_hash_for
from ..sandbox.judge.pool import source_hash
from ..sandbox.results import EvalResult
from ..store import config_key
from .llm import ChatClient, Endpoints, LLMConfig, ResponseCache, UsageLedger

if TYPE_CHECKING:
    from ..cluster import Evaluator
    from ..run.rundir import RunDir
    from ..sandbox.config import EvalConfig
    from ..sandbox.task import Task
    from ..store import Store
    from .state import Candidate


def llm_configs(config: RunConfig, env: Mapping[str, str] | None = None) -> dict[Role, LLMConfig]:
    """One LLMConfig per role. A role is offline when its model is "offline" or there is no key."""
    return {
        role: LLMConfig.from_env(
            config.model_for(role),
            env=env,
            use_cache=False if config.no_cache else None,
            context_window=config.context_window_for(role),
            max_output_tokens=config.max_output_tokens_for(role),
        )
        for role in ROLES
    }


@dataclass
class RunContext:
    """What the nodes need besides the state: LangGraph's runtime context, never checkpointed."""

    config: RunConfig
    task: Task
    eval_config: EvalConfig
    pool: Evaluator  # the local EvalPool or a cluster's (cluster/)
    rundir: RunDir
    llm: dict[Role, LLMConfig]
    interpreter: bool  # no CUDA: candidates run under the Triton interpreter, timings meaningless
    cache: ResponseCache | None = None
    limiter: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(4)
    )
    store: Store | None = None  # results store: run rows, candidates, the verdict cache
    store_error: str | None = None  # finalize's sync into the store failed (finalize.py)
    # What each endpoint and model taught this run (parameters, window) and their circuit
    # breakers: shared by the clients of every node, which are built per call.
    endpoints: Endpoints = field(default_factory=Endpoints)

    def online(self, role: Role) -> bool:
        return not self.llm[role].offline

    def client(self, role: Role, ledger: UsageLedger) -> ChatClient | None:
        """A chat client for `role` counting into `ledger` (one per node call), or None offline."""
        if not self.online(role):
            return None
        return ChatClient(
            self.llm[role],
            self.cache,
            self.rundir.record,
            ledger=ledger,
            limiter=self.limiter,
            endpoints=self.endpoints,
        )

    def models(self) -> dict[str, str]:
        """run.json's models block: the model of each role, "offline" for the rules."""
        return {role: OFFLINE if cfg.offline else cfg.model for role, cfg in self.llm.items()}


def run_context(
    config: RunConfig,
    task: Task,
    rundir: RunDir,
    pool: Evaluator,
    store: Store | None,
    *,
    interpreter: bool,
) -> RunContext:
    """The nodes' runtime context for one (possibly resumed) run; `store`, the invocation's
    results store (None: the run records into none), gets the run's row now."""
    llm = llm_configs(config)
    online = [cfg for cfg in llm.values() if not cfg.offline]
    cache_path = online[0].cache_path if online else None
    models: dict[str, str] = {r: OFFLINE if cfg.offline else cfg.model for r, cfg in llm.items()}
    cache = ResponseCache(cache_path) if cache_path else None
    if store is not None:
        record_start(store, rundir.read_run(), models)
    return RunContext(
        config=config,
        task=task,
        eval_config=eval_config_for(config),
        pool=pool,
        rundir=rundir,
        llm=llm,
        interpreter=interpreter,
        cache=cache,
        limiter=threading.BoundedSemaphore(max([c.max_concurrency for c in online], default=1)),
        store=store,
        endpoints=Endpoints(cache, read_stored=not config.no_cache),
    )


def lookup_verdict(ctx: RunContext, source: str) -> EvalResult | None:
    """The store's verdict on this exact source, task, environment and config, if it has one."""
    if ctx.store is None:
        return None
    env = ctx.pool.describe(ctx.task)  # on a mixed cluster: the GPU model this task runs on
    return ctx.store.lookup_result(
        task_hash_for(ctx.task, ctx.eval_config),
        source_hash(source),
        env.key,
        config_key(ctx.eval_config),
    )


def remember_verdict(ctx: RunContext, result: EvalResult) -> None:
    """Cache a fresh verdict (the store keeps only those that are the candidate's own)."""
    if ctx.store is not None and result.source_hash:
        ctx.store.record_result(result, config_key(ctx.eval_config))


def record_candidate(
    ctx: RunContext, cand: Candidate, source: str, result: EvalResult, *, cached: bool
) -> None:
    """A candidate's final verdict in the store's candidates table (and cache)."""
    if ctx.store is not None:
        ctx.store.record_candidate(
            ctx.rundir.run_id,
            cand.round,
            cand.index,
            source,
            result,
            config_key(ctx.eval_config),
            cached=cached,
        )
