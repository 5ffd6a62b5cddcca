"""The response cache (SQLite): the same request replays the same reply, at no cost."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...store import enable_wal
from .messages import Message
from .replies import ChatReply


class ResponseCache:
    """SQLite cache of replies: the same request replays the same text, at no cost.

    One connection per thread; WAL and a busy timeout make it safe for several processes.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
        "reply TEXT NOT NULL, created REAL NOT NULL)"
    )
    # What an endpoint taught about a model (EndpointFacts as JSON): the next run starts there.
    _FACTS_SCHEMA = (
        "CREATE TABLE IF NOT EXISTS endpoint_facts (endpoint TEXT NOT NULL, model TEXT NOT NULL, "
        "facts TEXT NOT NULL, updated REAL NOT NULL, PRIMARY KEY (endpoint, model))"
    )
    BUSY_TIMEOUT_MS = 30_000  # a writer in another process holds the lock for milliseconds

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connection() as conn:
            conn.execute(self._SCHEMA)
            conn.execute(self._FACTS_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.BUSY_TIMEOUT_MS / 1000)
            conn.execute(f"PRAGMA busy_timeout={self.BUSY_TIMEOUT_MS}")
            enable_wal(conn, self.BUSY_TIMEOUT_MS / 1000)  # not under the busy handler
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def key(
        model: str,
        messages: Sequence[Message],
        params: Mapping[str, Any],
        schema_name: str | None = None,
    ) -> str:
        """sha256 of (model, messages, sampling params, schema name), canonical JSON."""
        blob = json.dumps(
            {
                "model": model,
                "messages": list(messages),
                "params": dict(params),
                "schema": schema_name,
            },
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        row = (
            self._connection().execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        )
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, reply: Mapping[str, Any]) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO replies (key, model, reply, created) VALUES (?, ?, ?, ?)",
                (key, model, json.dumps(dict(reply)), time.time()),
            )

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def get_facts(self, endpoint: str, model: str) -> dict[str, Any] | None:
        row = (
            self._connection()
            .execute(
                "SELECT facts FROM endpoint_facts WHERE endpoint = ? AND model = ?",
                (endpoint, model),
            )
            .fetchone()
        )
        return json.loads(row[0]) if row else None

    def put_facts(self, endpoint: str, model: str, facts: Mapping[str, Any]) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO endpoint_facts (endpoint, model, facts, updated) "
                "VALUES (?, ?, ?, ?)",
                (endpoint, model, json.dumps(dict(facts), sort_keys=True), time.time()),
            )

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def cache_entry(reply: ChatReply) -> dict[str, Any]:
    return {
        "text": reply.text,
        "model": reply.model,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "finish_reason": reply.finish_reason,
        "usage_estimated": reply.usage_estimated,
        "reasoning": reply.reasoning,
        "max_tokens": reply.max_tokens,
        "continuations": reply.continuations,
        "truncated": reply.truncated,
    }
