"""Nightly reports: the latest night against the one before, and the nightly files."""

from __future__ import annotations

import json

import pytest
from test_report_support import (
    HISTORY,
    blue_pixels,
    ok_result,
)

from kernelwright.report.nightly import nightly_changes, write_nightly_report
from kernelwright.store import Store


def test_nightly_changes_flag_failures_and_slowdowns():
    changes = {(c["task"], c["env_key"].split("|")[0]): c for c in nightly_changes(HISTORY)}
    soft = changes[("softmax", "NVIDIA H100")]
    assert soft["regression"] and soft["slowdown"] == pytest.approx(1.20 / 1.02 - 1)
    assert soft["reason"] == "18% slower than 2025-03-02"
    gelu = changes[("gelu", "NVIDIA H100")]
    assert gelu["regression"] and gelu["reason"] == "now incorrect [mismatch]"
    ln = changes[("layernorm", "NVIDIA H100")]
    assert not ln["regression"] and ln["slowdown"] == pytest.approx(0.05)
    assert not changes[("matmul", "NVIDIA H100")]["regression"]  # first night: nothing to compare
    a100 = changes[("softmax", "NVIDIA A100")]
    assert not a100["regression"] and a100["previous_night"] is None
    assert [c["regression"] for c in nightly_changes(HISTORY)][:2] == [True, True]  # first
    looser = {c["task"]: c for c in nightly_changes(HISTORY, slowdown=0.2) if c["previous_night"]}
    assert not looser["softmax"]["regression"] and looser["gelu"]["regression"]


def test_nightly_report_from_store_history(tmp_path):
    store = Store(tmp_path / "kw.db")
    for n, ms in ((1, 1.0), (2, 1.3)):  # eager stays at 2 ms, the kernel gets 30% slower
        r = ok_result(2.0 / ms, 1.0, 0.5, candidate_ms=ms)
        store.record_verification(r, task_name="scale", night=f"2025-03-0{n}")
    paths = write_nightly_report(store.history(), tmp_path / "nightly")
    md = paths["markdown"].read_text()
    assert md.splitlines()[2].startswith("1 regression among 1 kernel, night 2025-03-02 (")
    row = "| scale | NVIDIA H100 | 2025-03-02 | ok | 1.54x | 1.3 ms | 2025-03-01 | 2.00x | +30.0%"
    assert row in md
    data = json.loads(paths["json"].read_text())
    assert data["regressions"] == 1 and data["changes"][0]["reason"] == "30% slower than 2025-03-01"
    assert blue_pixels(paths["plot"]) > 50
