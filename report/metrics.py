"""The results store as flat tables for dashboards (Power BI, Grafana, a notebook): runs,
candidates, current kernels, kernel versions and nightly history, one table each, written as CSV
(the csv module) or Parquet (pyarrow, the optional `metrics` extra).

Flat: one column per number a chart wants (speedups, median times, the GPU, torch and triton
versions apart), no JSON in a cell. Timestamps are ISO 8601 in UTC in CSV and timestamp[us, UTC]
in Parquet, nights are dates; a table with no rows is still written, with its header (CSV) or
its schema (Parquet). Candidates come from the store's candidates table: every candidate a run
recorded, with the evaluator's full verdict.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sandbox.results import EvalResult, fault_of
from ..store import Store

FORMATS = ("csv", "parquet")

# A column's kind: how it is typed in Parquet and written in CSV.
KINDS = ("str", "int", "float", "bool", "timestamp", "date")


@dataclass(frozen=True)
class Table:
    """One table: its name (the file's stem), its columns (name, kind) and its rows."""

    name: str
    columns: tuple[tuple[str, str], ...]
    rows: list[dict[str, Any]]


def timestamp(text: Any) -> dt.datetime | None:
    """An ISO 8601 text as an aware UTC datetime (a naive one is taken as UTC); None if not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def night_date(text: Any) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def env_columns(env_key: str) -> dict[str, str]:
    """An environment key ("NVIDIA H100|torch 2.11.0|triton 3.6.0") as gpu, torch, triton."""
    gpu, _, rest = (env_key or "").partition("|")
    versions = dict(part.partition(" ")[::2] for part in rest.split("|") if part)
    return {"gpu": gpu, "torch": versions.get("torch", ""), "triton": versions.get("triton", "")}


ENV = (("gpu", "str"), ("torch", "str"), ("triton", "str"), ("env_key", "str"))


def _times(result: EvalResult) -> dict[str, float | None]:
    """Median ms of candidate, eager and torch.compile (None where not timed), and whether
    the times mean anything (False on the Triton interpreter)."""
    t = result.timings
    ms = {
        f"{name}_ms": getattr(t, name).median_ms if t and getattr(t, name) else None
        for name in ("candidate", "eager", "compiled")
    }
    return {**ms, "timing_meaningful": bool(t and t.meaningful)}


TIMES = (
    ("candidate_ms", "float"),
    ("eager_ms", "float"),
    ("compiled_ms", "float"),
    ("timing_meaningful", "bool"),
)
SPEEDUPS = (("speedup_eager", "float"), ("speedup_compiled", "float"))


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:500]


# -- the tables -----------------------------------------------------------------------------------
def runs_table(store: Store) -> Table:
    columns = (
        ("run_id", "str"),
        ("task_name", "str"),
        ("task_path", "str"),
        ("task_hash", "str"),
        ("status", "str"),
        ("stop_reason", "str"),
        ("created", "timestamp"),
        ("finished", "timestamp"),
        *ENV,
        ("dtype", "str"),
        ("precision", "str"),
        ("baseline", "str"),
        ("planner_model", "str"),
        ("coder_model", "str"),
        ("critic_model", "str"),
        ("best_speedup_eager", "float"),
        ("best_speedup_compiled", "float"),
        ("best_roofline_fraction", "float"),
        ("llm_calls", "int"),
        ("prompt_tokens", "int"),
        ("completion_tokens", "int"),
        ("cost_usd", "float"),
    )
    rows = []
    for r in store.runs(limit=None):
        config, usage = r.config, r.usage
        rows.append(
            {
                "run_id": r.id,
                "task_name": r.task_name,
                "task_path": r.task_path,
                "task_hash": r.task_hash,
                "status": r.status,
                "stop_reason": r.stop_reason,
                "created": timestamp(r.created),
                "finished": timestamp(r.finished),
                **env_columns(r.env_key),
                "env_key": r.env_key,
                "dtype": config.get("dtype") or "fp32",
                "precision": config.get("precision") or "strict",
                "baseline": config.get("baseline"),
                **{f"{role}_model": r.models.get(role) for role in ("planner", "coder", "critic")},
                "best_speedup_eager": r.best_speedup_eager,
                "best_speedup_compiled": r.best_speedup_compiled,
                "best_roofline_fraction": r.best_roofline_fraction,
                "llm_calls": usage.get("calls"),
                "prompt_tokens": usage.get("prompt_tokens"),
                "completion_tokens": usage.get("completion_tokens"),
                "cost_usd": usage.get("cost_usd"),
            }
        )
    return Table("runs", columns, rows)


def candidates_table(store: Store) -> Table:
    columns = (
        ("run_id", "str"),
        ("task_name", "str"),
        ("round", "int"),
        ("index", "int"),
        ("status", "str"),
        ("rule", "str"),
        ("fault", "str"),
        ("message", "str"),
        ("source_hash", "str"),
        ("task_hash", "str"),
        *ENV,
        ("config_key", "str"),
        ("dtype", "str"),
        *SPEEDUPS,
        ("roofline_fraction", "float"),
        *TIMES,
        ("cached", "bool"),
        ("created", "timestamp"),
    )
    rows = []
    for run in store.runs(limit=None):
        for c in store.candidates(run.id):
            result = c.result
            rows.append(
                {
                    "run_id": c.run_id,
                    "task_name": run.task_name,
                    "round": c.round,
                    "index": c.index,
                    "status": c.status,
                    "rule": c.rule,
                    "fault": fault_of(c.status, c.rule),
                    "message": _first_line(c.message),
                    "source_hash": c.source_hash,
                    "task_hash": c.task_hash,
                    **env_columns(c.env_key),
                    "env_key": c.env_key,
                    "config_key": c.config_key,
                    "dtype": result.dtype,
                    "speedup_eager": result.speedup_eager,
                    "speedup_compiled": result.speedup_compiled,
                    "roofline_fraction": result.roofline.fraction if result.roofline else None,
                    **_times(result),
                    "cached": c.cached,
                    "created": timestamp(c.created),
                }
            )
    return Table("candidates", columns, rows)


KERNEL = (("task_name", "str"), ("task_hash", "str"), ("variant", "str"), *ENV)


def current_kernels_table(store: Store) -> Table:
    columns = (
        *KERNEL,
        ("version", "int"),
        *SPEEDUPS,
        ("roofline_fraction", "float"),
        *TIMES,
        ("run_id", "str"),
        ("source_hash", "str"),
        ("verified", "timestamp"),
    )
    rows = [
        {
            "task_name": b.task_name,
            "task_hash": b.task_hash,
            "variant": b.variant,
            **env_columns(b.env_key),
            "env_key": b.env_key,
            "version": b.version,
            "speedup_eager": b.speedup_eager,
            "speedup_compiled": b.speedup_compiled,
            "roofline_fraction": b.roofline_fraction,
            **_times(b.result),
            "run_id": b.run_id,
            "source_hash": b.source_hash,
            "verified": timestamp(b.verified),
        }
        for b in store.current_kernels()
    ]
    return Table("current_kernels", columns, rows)


def versions_table(store: Store) -> Table:
    columns = (
        *KERNEL,
        ("version", "int"),
        ("state", "str"),
        ("current", "bool"),
        ("status", "str"),
        *SPEEDUPS,
        ("roofline_fraction", "float"),
        ("candidate_ms", "float"),
        ("run_id", "str"),
        ("source_hash", "str"),
        ("promoted_by", "str"),
        ("promoted", "timestamp"),
        ("verified", "timestamp"),
        ("note", "str"),
        ("reverted", "timestamp"),
        ("reverted_by", "str"),
        ("revert_reason", "str"),
    )
    rows = [
        {
            "task_name": v.task_name,
            "task_hash": v.task_hash,
            "variant": v.variant,
            **env_columns(v.env_key),
            "env_key": v.env_key,
            "version": v.version,
            "state": v.state,
            "current": v.current,
            "status": v.status,
            "speedup_eager": v.speedup_eager,
            "speedup_compiled": v.speedup_compiled,
            "roofline_fraction": v.roofline_fraction,
            "candidate_ms": v.candidate_ms,
            "run_id": v.run_id,
            "source_hash": v.source_hash,
            "promoted_by": v.promoted_by,
            "promoted": timestamp(v.promoted),
            "verified": timestamp(v.verified),
            "note": v.note,
            "reverted": timestamp(v.reverted),
            "reverted_by": v.reverted_by,
            "revert_reason": v.revert_reason,
        }
        for v in store.kernel_versions()
    ]
    return Table("versions", columns, rows)


def nightly_table(store: Store) -> Table:
    columns = (
        *KERNEL,
        ("night", "date"),
        ("status", "str"),
        ("rule", "str"),
        ("fault", "str"),
        ("source_hash", "str"),
        *SPEEDUPS,
        ("candidate_ms", "float"),
        ("eager_ms", "float"),
        ("compiled_ms", "float"),
        ("roofline_fraction", "float"),
        ("message", "str"),
        ("recorded", "timestamp"),
    )
    rows = [
        {
            "task_name": h.task_name,
            "task_hash": h.task_hash,
            "variant": h.variant,
            **env_columns(h.env_key),
            "env_key": h.env_key,
            "night": night_date(h.night),
            "status": h.status,
            "rule": h.rule,
            "fault": fault_of(h.status, h.rule),
            "source_hash": h.source_hash,
            "speedup_eager": h.speedup_eager,
            "speedup_compiled": h.speedup_compiled,
            "candidate_ms": h.candidate_ms,
            "eager_ms": h.eager_ms,
            "compiled_ms": h.compiled_ms,
            "roofline_fraction": h.roofline_fraction,
            "message": _first_line(h.message),
            "recorded": timestamp(h.recorded),
        }
        for h in store.history()
    ]
    return Table("nightly", columns, rows)


TABLES: tuple[Callable[[Store], Table], ...] = (
    runs_table,
    candidates_table,
    current_kernels_table,
    versions_table,
    nightly_table,
)


def tables(store: Store) -> list[Table]:
    return [make(store) for make in TABLES]


# -- writers --------------------------------------------------------------------------------------
def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def write_csv(table: Table, path: Path) -> None:
    names = [name for name, _ in table.columns]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        writer.writerows([_csv_cell(row.get(n)) for n in names] for row in table.rows)


def parquet_schema(columns: Sequence[tuple[str, str]]):
    import pyarrow as pa

    types = {
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "date": pa.date32(),
    }
    return pa.schema([pa.field(name, types[kind]) for name, kind in columns])


def write_parquet(table: Table, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema(table.columns)
    data = {name: [row.get(name) for row in table.rows] for name, _ in table.columns}
    pq.write_table(pa.Table.from_pydict(data, schema=schema), path)


def write_tables(
    found: Iterable[Table], out_dir: str | Path, fmt: str = "csv"
) -> list[tuple[Path, int]]:
    """Each table to OUT_DIR/<name>.<fmt>; the files written with their row counts."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write = write_csv if fmt == "csv" else write_parquet
    written = []
    for table in found:
        path = out / f"{table.name}.{fmt}"
        tmp = path.with_name(f".{path.name}.tmp")  # a dashboard never reads half a file
        write(table, tmp)
        tmp.replace(path)
        written.append((path, len(table.rows)))
    return written
