"""Formatting for the reports: numbers (speedups, percentages, money, times), Markdown tables,
JSON files, and the names of the rows they show. Plain text; HTML is report/html.py's."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..decisions import finite
from ..sandbox.results import EvalResult


def x_text(value: Any) -> str:
    v = finite(value)
    return f"{v:.2f}x" if v is not None else "–"


def pct_text(value: Any) -> str:
    v = finite(value)
    return f"{v:.0%}" if v is not None else "–"


def num_text(value: Any) -> str:
    v = finite(value)
    if v is None:
        return "–"
    return f"{int(v):,}" if v == int(v) else f"{v:,.2f}"


def usd_text(value: Any) -> str:
    v = finite(value)
    return f"${v:.4f}" if v is not None else "–"


def ms_text(value: Any) -> str:
    v = finite(value)
    return f"{v:.4g} ms" if v is not None else "–"


def json_safe(value: Any) -> Any:
    """Plain JSON: dataclasses as dicts, non-finite floats as None (JSON has no NaN)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")
    return path


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (a run killed mid-write)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _md_cell(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def usage_text(usage: Mapping[str, Any]) -> str:
    if not usage:
        return "no LLM calls recorded"
    failed = usage.get("failed_calls", 0)
    return (
        f"{num_text(usage.get('calls', 0))} calls answered "
        f"({num_text(usage.get('cached_calls', 0))} cached)"
        + (f", {num_text(failed)} failed ({failures_text(usage)})" if failed else "")
        + (f", {num_text(usage['refused_calls'])} not sent" if usage.get("refused_calls") else "")
        + f", {num_text(usage.get('prompt_tokens', 0))} prompt + "
        f"{num_text(usage.get('completion_tokens', 0))} completion tokens, "
        f"{usd_text(usage.get('cost_usd'))}"
        + "".join(f"; {note}" for note in usage.get("notes") or [] if isinstance(note, str))
    )


def failures_text(u: Mapping[str, Any]) -> str:
    failures = u.get("failures") or {}
    return ", ".join(f"{n} {kind}" for kind, n in sorted(failures.items())) or "–"


def peaks(candidate: Any, reference: Any) -> str:
    """'1.20 / 0.85 GiB', or '–' where device memory was not measured (the interpreter)."""
    if candidate is None and reference is None:
        return "–"
    gib = [("?" if v is None else f"{v / 2**30:.2f}") for v in (candidate, reference)]
    return f"{gib[0]} / {gib[1]} GiB"


def short_note(note: Any) -> str:
    """The note's first line, at most 120 characters: a table cell, not the whole message."""
    text = str(note or "").strip().split("\n", 1)[0]
    return text if len(text) <= 120 else text[:117] + "..."


def memory_fields(result: EvalResult) -> dict[str, Any]:
    """Peak device memory of the candidate and of the reference (bytes; None on CPU)."""
    m = result.memory
    return {
        "candidate_peak_bytes": m.candidate_peak_bytes if m else None,
        "reference_peak_bytes": m.reference_peak_bytes if m else None,
    }


def as_mapping(row: Any) -> Mapping[str, Any]:
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    return row


def series_name(h: Mapping[str, Any]) -> str:
    name = h.get("task_name") or str(h.get("task_hash", "?"))[:12]
    variant = h.get("variant") or "fp32"
    return name if variant == "fp32" else f"{name} ({variant})"


def series_key(h: Mapping[str, Any]) -> tuple[str, str, str]:
    gpu = str(h.get("env_key", "")).split("|", 1)[0]
    return (str(h.get("task_hash", "")), str(h.get("variant") or "fp32"), gpu)
