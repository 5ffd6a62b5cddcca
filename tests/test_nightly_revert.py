"""`nightly --revert-on-regression`: a current kernel that regressed is taken back and the previous
version, verified tonight, is current again; the console, the report (md, json, html) and stderr
say which task went from which version to which and why. On the Triton interpreter with the real
evaluator (a WRONG kernel promoted over a good one), and with a scripted GPU for the rest."""

from __future__ import annotations

import dataclasses
import io
import json
from concurrent.futures import Future

import torch
from test_cli_support import EXAMPLES, kw
from test_nightly import ENV, GELU, NEW, OLD, WRONG, ScriptedSearch, TimedPool, _gelu

from kernelwright.run.config import RunConfig, eval_config_for
from kernelwright.sandbox.results import EvalResult
from kernelwright.store import Store, variant_key
from kernelwright.suites.nightly import Nightly

GOOD = (EXAMPLES / "gelu.py").read_text()


def test_a_wrong_current_kernel_is_reverted_to_the_verified_previous_one(tmp_path):
    from kernelwright.sandbox.judge.pool import EvalPool

    db = tmp_path / "k.db"
    store = Store(db)
    config = RunConfig(model="offline", trials=1, workers=1, out_dir=str(tmp_path / "runs"))
    # What the nightly will judge at: the task shrunk for the interpreter, as the CLI does.
    job = Nightly(None, config, store, None, io.StringIO(), cuda=torch.cuda.is_available())
    night_config, task = job.task_setup(GELU)
    variant = variant_key(eval_config_for(night_config))
    with EvalPool(1) as pool:
        good = pool.submit(task, GOOD, eval_config_for(night_config)).result()
    assert good.ok, good.summary()
    store.set_best_kernel(GOOD, good, variant=variant, task_name="gelu", run_id="gelu-1")
    # Someone promotes a broken "improvement" as v2.
    store.set_best_kernel(WRONG, good, variant=variant, only_if_better=False, promoted_by="promote")
    key = (good.task_hash, good.environment.key, variant)
    assert store.best_kernel(*key).version == 2

    code, out, err = kw(
        "nightly", GELU, "--model", "offline", "--trials", "1", "--workers", "1",
        "--db", db, "--out", tmp_path / "runs", "--night", "2026-06-01", "--no-search",
        "--revert-on-regression",
    )  # fmt: skip
    assert code == 1, out + err  # the night still fails: a regression happened
    assert "[gelu] REGRESSION: now incorrect" in out
    assert "reverted v2 -> v1 (now incorrect" in out and "v1 tonight: ok" in out
    assert "kernelwright: [gelu] reverted from v2 to v1: now incorrect" in err
    best = store.best_kernel(*key)
    assert (best.version, best.source, best.run_id) == (1, GOOD, "gelu-1")
    v1, v2 = store.kernel_versions(*key)
    assert v1.current and (v2.state, v2.reverted_by) == ("reverted", "nightly")
    assert v2.revert_reason.startswith("now incorrect")
    report = tmp_path / "nightly" / "2026-06-01"
    md = (report / "nightly.md").read_text()
    assert "1 task(s) reverted to a previous kernel version" in md and "## Reverted" in md
    assert "| gelu | " in md.split("## Reverted")[1] and "| v2 | v1 | now incorrect" in md
    (revert,) = json.loads((report / "nightly.json").read_text())["reverts"]
    assert (revert["from_version"], revert["to_version"]) == (2, 1)
    assert revert["restored"].startswith("ok")
    assert "<h2>Reverted</h2>" in (report / "nightly.html").read_text()


class WrongPool(TimedPool):
    """A scripted GPU where the sources in `wrong` come back incorrect."""

    def __init__(self, times: dict[str, float], wrong: set[str]) -> None:
        super().__init__(times)
        self.wrong = wrong

    def submit(self, task, source, config) -> Future:
        result = super().submit(task, source, config).result()
        if source in self.wrong:
            result = dataclasses.replace(
                result, status="incorrect", rule="mismatch", timings=None, speedup_eager=None
            )
        future: Future = Future()
        future.set_result(result)
        return future


def _night(store, pool, config, date, **flags):
    job = Nightly(ScriptedSearch(pool), config, store, pool, io.StringIO(), night=date, cuda=True)
    job.revert_on_regression = True
    for name, value in flags.items():
        setattr(job, name, value)
    (outcome,) = job.run([GELU])
    return outcome


def test_a_previous_version_that_fails_too_is_reverted_as_well_until_none_is_left(tmp_path):
    store = Store(tmp_path / "k.db")
    older, mid = "# v1\n", "# v2\n"
    pool = WrongPool({older: 5.0, mid: 4.0, OLD: 3.0, NEW: 4.5}, wrong=set())
    config = RunConfig(model="offline", out_dir=str(tmp_path / "runs"), db=str(tmp_path / "k.db"))
    for source in (older, mid, OLD):
        result: EvalResult = pool.submit(_gelu(), source, config).result()
        store.set_best_kernel(source, result, variant="fp32", task_name="gelu")
    key = (result.task_hash, ENV.key, "fp32")
    _night(store, pool, config, "2026-07-01", search=False)
    pool.wrong = {OLD, mid}
    outcome = _night(store, pool, config, "2026-07-02", search=False)
    assert [(r.from_version.version, r.to_version.version) for r in outcome.reverts] == [
        (3, 2), (2, 1)
    ]  # fmt: skip
    assert outcome.reverts[1].reason.startswith("v2 fails tonight too: incorrect [mismatch]")
    assert outcome.restored_ok and store.best_kernel(*key).source == older
    # Tonight's measurement of the restored v1 is its record now; no version was added.
    assert store.best_kernel(*key).speedup_eager == 2.0 and len(store.kernel_versions()) == 3

    pool.wrong = {older}  # the last version breaks too: nothing left to revert to
    outcome = _night(store, pool, config, "2026-07-03", search=False)
    assert outcome.reverts == [] and outcome.revert_note == "no earlier version on this environment"
    assert "not reverted: no earlier version" in outcome.line()


def test_a_slowdown_is_reverted_and_the_search_must_beat_the_restored_version(tmp_path):
    store = Store(tmp_path / "k.db")
    pool = WrongPool({OLD: 5.0, NEW: 4.5, "# v2\n": 4.0}, wrong=set())
    config = RunConfig(model="offline", out_dir=str(tmp_path / "runs"), db=str(tmp_path / "k.db"))
    for source in (OLD, "# v2\n"):
        result = pool.submit(_gelu(), source, config).result()
        store.set_best_kernel(source, result, variant="fp32", task_name="gelu")
    key = (result.task_hash, ENV.key, "fp32")
    _night(store, pool, config, "2026-08-01")
    pool.times["# v2\n"] = 6.0  # 50% slower than last night
    outcome = _night(store, pool, config, "2026-08-02")
    assert outcome.regression and outcome.change["reason"] == "50% slower than 2026-08-01"
    assert [r.to_version.version for r in outcome.reverts] == [1] and outcome.restored_ok
    # The search ran and its winner (2.22x) beat the restored v1 (2.00x): it is v3.
    assert outcome.searched == "gelu-search-1"
    best = store.best_kernel(*key)
    assert (best.source, best.version) == (NEW, 3)
