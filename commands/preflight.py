"""Checks before a run starts, each failing with one line a person can act on: the model's API
key, the endpoint being reachable, and whether this machine can time anything at all."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..agents.context import llm_configs
from ..agents.llm import ChatClient, LLMConfig, LLMError
from ..errors import KernelwrightError
from ..run.config import ROLES, RunConfig

# Long enough for a slow DNS or TLS handshake, short enough that a dead endpoint fails quickly.
PREFLIGHT_TIMEOUT_S = 10.0

OFFLINE_HINT = (
    "without one kernelwright runs offline: --model offline (rule-based planner and critic, "
    "fusion codegen as coder)"
)


class PreflightError(KernelwrightError):
    """A run that cannot start as asked: one line saying why and what to do."""

    fault = "configuration"


def endpoint_of(cfg: LLMConfig) -> str:
    if cfg.azure:
        return cfg.azure_endpoint or "(Azure endpoint not set)"
    return cfg.base_url or "https://api.openai.com/v1"


def check_models(config: RunConfig, env: Mapping[str, str] | None = None) -> None:
    """Raise PreflightError when a model was asked for but cannot be used.

    A role with a model named but no API key (and no endpoint) would silently fall back to the
    rules; a person who asked for a model wants to know instead. An endpoint that cannot be
    reached fails here, once, rather than as a fallback in every round.
    """
    configs = llm_configs(config, env)
    checked: set[tuple[str, str | None]] = set()
    for role in ROLES:
        asked = config.model_for(role)
        cfg = configs[role]
        if cfg.offline:
            if asked and asked.strip().lower() not in ("offline", "none"):
                raise PreflightError(
                    f"no API key for model {asked}: set OPENAI_API_KEY (and OPENAI_BASE_URL for "
                    f"another OpenAI-compatible endpoint); {OFFLINE_HINT}"
                )
            continue
        where = (endpoint_of(cfg), cfg.api_key)
        if where in checked:
            continue
        checked.add(where)
        check_endpoint(cfg)


def check_endpoint(cfg: LLMConfig) -> None:
    """Raise PreflightError when the endpoint cannot be reached or refuses the key.

    GET /models is the probe: it costs no tokens. An endpoint that serves chat but not /models
    (some local servers) answers 404, which says nothing against it, so only a failed connection,
    a timeout and an authentication error stop the run.
    """
    timeout = min(cfg.timeout_s, PREFLIGHT_TIMEOUT_S)
    client = ChatClient(dataclasses.replace(cfg, timeout_s=timeout, cache_path=None))
    try:
        client.list_models()
    except LLMError as e:
        url = endpoint_of(cfg)
        if e.kind in ("connection", "timeout"):
            raise PreflightError(
                f"cannot reach the model endpoint {url} ({e.message}); check OPENAI_BASE_URL "
                "and the network, or run with --model offline"
            ) from None
        if e.kind == "auth":
            raise PreflightError(
                f"the model endpoint {url} refused the API key ({e.message.split(' -- ')[0]}); "
                "check OPENAI_API_KEY"
            ) from None
    finally:
        client.close()


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


NO_GPU_NOTE = (
    "no CUDA GPU here: correctness only, under the Triton interpreter (no timings, no speedups); "
    "run on a CUDA machine to measure"
)
