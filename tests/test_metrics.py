"""`kernelwright metrics`: the store's runs, candidates, current kernels, versions and nightly
history as flat CSV (a header, then rows) and Parquet (typed columns, read back with pyarrow);
an empty store gives every table with its header or schema and no rows."""

from __future__ import annotations

import csv
import datetime as dt

import pytest
from test_cli_support import kw
from test_versions import A100, H100, ok

from kernelwright.sandbox.config import EvalConfig
from kernelwright.sandbox.results import EvalResult
from kernelwright.store import Store, config_key

TABLES = ("runs", "candidates", "current_kernels", "versions", "nightly")
UTC = dt.timezone.utc


def filled(path) -> Store:
    """A store with one run (an ok and an incorrect candidate), two versions of its kernel on
    the H100 (the second reverted), one on the A100, and two nights of history."""
    store = Store(path)
    store.record_run(
        "softmax-1",
        task_path="tasks/softmax.py",
        task_name="softmax",
        task_hash="t1",
        config={"dtype": "fp32", "baseline": "fastest"},
        models={"coder": "gpt-4o"},
        created="2026-05-01T10:00:00+00:00",
    )
    store.update_run(
        "softmax-1",
        status="done",
        finished="2026-05-01T10:20:00+00:00",
        env_key=H100.key,
        best_speedup_eager=2.0,
        usage={"calls": 7, "prompt_tokens": 900, "completion_tokens": 300, "cost_usd": 0.12},
    )
    key = config_key(EvalConfig())
    store.record_candidate("softmax-1", 1, 0, "good", ok(2.0), key)
    wrong = EvalResult(
        status="incorrect", rule="mismatch", message="3 of 4096 elements differ\nmore",
        task="softmax", task_hash="t1", environment=H100,
    )  # fmt: skip
    store.record_candidate("softmax-1", 1, 1, "bad", wrong, key)
    store.set_best_kernel("good", ok(2.0), run_id="softmax-1")
    store.set_best_kernel("faster", ok(2.5), run_id="softmax-2")
    store.revert_kernel("t1", H100.key, "fp32", reason="wrong on batch 1")
    store.set_best_kernel("a100", ok(1.8, env=A100))
    store.record_verification(ok(2.0), task_name="softmax", night="2026-05-02")
    store.record_verification(wrong, task_name="softmax", night="2026-05-03")
    return store


def test_csv_tables_have_a_header_and_flat_rows(tmp_path):
    filled(tmp_path / "k.db")
    code, out, err = kw(
        "metrics", "--db", tmp_path / "k.db", "--format", "csv", "--out", tmp_path / "m"
    )
    assert code == 0, err
    counts = {"runs": 1, "candidates": 2, "current_kernels": 2, "versions": 3, "nightly": 2}
    for name, n in counts.items():
        assert f"{tmp_path / 'm' / name}.csv: {n} row" in out
    read = {n: list(csv.DictReader((tmp_path / "m" / f"{n}.csv").open())) for n in TABLES}
    assert {n: len(rows) for n, rows in read.items()} == counts
    (run,) = read["runs"]
    assert (run["gpu"], run["torch"], run["triton"]) == ("NVIDIA H100", "2.11.0", "3.6.0")
    assert (run["coder_model"], run["llm_calls"], run["cost_usd"]) == ("gpt-4o", "7", "0.12")
    assert dt.datetime.fromisoformat(run["finished"]) == dt.datetime(2026, 5, 1, 10, 20, tzinfo=UTC)
    good, bad = read["candidates"]
    assert (good["status"], float(good["speedup_eager"]), good["candidate_ms"]) == (
        "ok",
        2.0,
        "1.0",
    )
    assert (bad["status"], bad["rule"], bad["fault"]) == ("incorrect", "mismatch", "candidate")
    assert bad["message"] == "3 of 4096 elements differ" and bad["speedup_eager"] == ""
    states = [(v["gpu"], v["version"], v["state"], v["current"]) for v in read["versions"]]
    assert states == [
        ("NVIDIA A100", "1", "current", "true"),
        ("NVIDIA H100", "1", "current", "true"),
        ("NVIDIA H100", "2", "reverted", "false"),
    ]
    assert read["versions"][2]["revert_reason"] == "wrong on batch 1"
    assert [r["night"] for r in read["nightly"]] == ["2026-05-02", "2026-05-03"]
    for row in read["candidates"]:
        assert all("{" not in cell for cell in row.values())  # no JSON in a cell


def test_parquet_reads_back_with_pyarrow_typed(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow: the `metrics` extra")
    import pyarrow as pa

    filled(tmp_path / "k.db")
    code, _, err = kw(
        "metrics", "--db", tmp_path / "k.db", "--format", "parquet", "--out", tmp_path / "m"
    )
    assert code == 0, err
    runs = pq.read_table(tmp_path / "m" / "runs.parquet")
    assert runs.schema.field("created").type == pa.timestamp("us", tz="UTC")
    assert runs.schema.field("best_speedup_eager").type == pa.float64()
    assert runs.schema.field("llm_calls").type == pa.int64()
    assert runs.column("created").to_pylist() == [dt.datetime(2026, 5, 1, 10, 0, tzinfo=UTC)]
    cands = pq.read_table(tmp_path / "m" / "candidates.parquet").to_pylist()
    assert [(c["status"], c["speedup_eager"], c["cached"]) for c in cands] == [
        ("ok", 2.0, False), ("incorrect", None, False)
    ]  # fmt: skip
    nightly = pq.read_table(tmp_path / "m" / "nightly.parquet")
    assert nightly.schema.field("night").type == pa.date32()
    assert nightly.column("night").to_pylist() == [dt.date(2026, 5, 2), dt.date(2026, 5, 3)]
    versions = pq.read_table(tmp_path / "m" / "versions.parquet").to_pylist()
    assert [(v["version"], v["current"], v["promoted_by"]) for v in versions][1:] == [
        (1, True, "run"), (2, False, "run")
    ]  # fmt: skip
    assert versions[2]["reverted"].tzinfo is not None
    current = pq.read_table(tmp_path / "m" / "current_kernels.parquet").to_pylist()
    assert [(c["gpu"], c["version"], c["speedup_eager"]) for c in current] == [
        ("NVIDIA A100", 1, 1.8), ("NVIDIA H100", 1, 2.0)
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_an_empty_store_gives_every_table_with_headers_only(tmp_path, fmt):
    if fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow: the `metrics` extra")
    Store(tmp_path / "k.db").close()
    code, out, err = kw(
        "metrics", "--db", tmp_path / "k.db", "--format", fmt, "--out", tmp_path / "m"
    )
    assert code == 0, err
    assert out.count(": 0 rows") == len(TABLES)
    for name in TABLES:
        path = tmp_path / "m" / f"{name}.{fmt}"
        if fmt == "csv":
            lines = path.read_text().splitlines()
            assert len(lines) == 1 and lines[0].split(",")[:1] in (["run_id"], ["task_name"])
        else:
            table = pq.read_table(path)
            assert table.num_rows == 0 and len(table.schema) > 5


def test_metrics_without_a_store_says_so(tmp_path):
    code, _, err = kw("metrics", "--db", tmp_path / "none.db", "--out", tmp_path / "m")
    assert code == 2 and "no results store at" in err


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    import sys

    Store(tmp_path / "k.db").close()
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    code, _, err = kw(
        "metrics", "--db", tmp_path / "k.db", "--format", "parquet", "--out", tmp_path
    )
    assert code == 2 and "pip install 'kernelwright[metrics]'" in err
