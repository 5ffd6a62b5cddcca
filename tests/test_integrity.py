"""Tests of sandbox/candidate/integrity.py: the integrity snapshot and the thread census."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
from test_guard import run_json

from kernelwright.sandbox import rules
from kernelwright.sandbox.candidate import integrity

REPO = Path(__file__).resolve().parent.parent


# -- integrity snapshot and threads ----------------------------------------------------------------


def test_snapshot_is_stable():
    assert (
        integrity.integrity_diff(integrity.integrity_snapshot(), integrity.integrity_snapshot())
        == []
    )


def _owner(path: str):
    """The object at a dotted path: a module, or a class inside one."""
    import importlib

    module, _, attr = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize(
    "owner,name",
    [
        ("torch.cuda", "synchronize"),
        ("torch.Tensor", "sub"),
        ("torch.Tensor", "__eq__"),
        ("torch.cuda.Event", "elapsed_time"),
        ("time", "perf_counter"),
        ("torch", "allclose"),
        ("triton.testing", "do_bench"),
        ("torch.nn.Module", "__call__"),
        ("builtins", "print"),
        ("kernelwright.sandbox.static.check", "static_check"),
    ],
)
def test_patched_function_is_a_monkeypatch(monkeypatch, owner, name):
    before = integrity.integrity_snapshot()
    monkeypatch.setattr(_owner(owner), name, lambda *a, **k: None)
    diff = integrity.integrity_diff(before, integrity.integrity_snapshot())
    assert ("monkeypatch", f"{owner}.{name} (replaced)") in diff


def test_a_changed_import_path_is_a_monkeypatch(monkeypatch, tmp_path):
    before = integrity.integrity_snapshot()
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    diff = integrity.integrity_diff(before, integrity.integrity_snapshot())
    assert [rule for rule, what in diff if what.startswith("sys.path")] == ["monkeypatch"]


def test_restore_puts_patched_functions_back():
    import builtins

    import torch

    before = integrity.integrity_snapshot()
    real_isinstance, real_sync = builtins.isinstance, torch.cuda.synchronize
    try:
        builtins.isinstance = lambda obj, cls: True  # would break the evaluator's own reply
        torch.cuda.synchronize = lambda *a, **k: None
        torch.Tensor.sub = lambda *a, **k: None  # shadows TensorBase.sub
        after = integrity.integrity_snapshot()
        restored = integrity.integrity_restore(before)
        shadow_left = "sub" in vars(torch.Tensor)
        isinstance_back = builtins.isinstance is real_isinstance
    finally:
        builtins.isinstance, torch.cuda.synchronize = real_isinstance, real_sync
        if (
            "sub" in vars(torch.Tensor)
            and vars(torch.Tensor)["sub"] is not before["torch.Tensor.sub"]
        ):
            del torch.Tensor.sub
    assert ("monkeypatch", "builtins.isinstance (replaced)") in integrity.integrity_diff(
        before, after
    )
    assert {"builtins.isinstance", "torch.cuda.synchronize", "torch.Tensor.sub"} <= set(restored)
    assert isinstance_back
    assert not shadow_left  # the shadowing attribute is gone, not overwritten
    assert integrity.integrity_diff(before, integrity.integrity_snapshot()) == []


def test_changed_precision_flags_are_precision_flag():
    import torch

    before = integrity.integrity_snapshot()
    matmul = torch.backends.cuda.matmul
    old_tf32, old_dtype = matmul.allow_tf32, torch.get_default_dtype()
    old_precision = getattr(matmul, "fp32_precision", None)  # torch >= 2.9 keeps both spellings
    try:
        torch.backends.cuda.matmul.allow_tf32 = not old_tf32
        torch.set_default_dtype(torch.float64)
        diff = integrity.integrity_diff(before, integrity.integrity_snapshot())
    finally:
        matmul.allow_tf32 = old_tf32
        if old_precision is not None:
            matmul.fp32_precision = old_precision
        torch.set_default_dtype(old_dtype)
    rules = {what.split(" ")[0]: rule for rule, what in diff}
    assert rules["torch.backends.cuda.matmul.allow_tf32"] == "precision-flag"
    assert rules["torch.get_default_dtype()"] == "precision-flag"
    assert diff[0][0] == "precision-flag"  # flags come first: the worker reports diff[0]
    assert integrity.integrity_diff(before, integrity.integrity_snapshot()) == []


def test_global_module_hook_is_a_monkeypatch():
    import torch

    before = integrity.integrity_snapshot()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
    try:
        diff = integrity.integrity_diff(before, integrity.integrity_snapshot())
    finally:
        handle.remove()
    assert [rule for rule, what in diff if "_global_forward_hooks" in what] == ["monkeypatch"]


def test_python_threads_sees_every_thread():
    import _thread

    stop = threading.Event()
    started = threading.Event()
    raw: list[int] = []

    def raw_thread():
        raw.append(threading.get_ident())
        started.set()
        stop.wait(10)

    before = integrity.python_threads()
    t = threading.Thread(target=stop.wait, args=(10,))
    t.start()
    _thread.start_new_thread(raw_thread, ())
    started.wait(10)
    try:
        extra = integrity.python_threads() - before
        assert {t.ident, raw[0]} <= extra
    finally:
        stop.set()
        t.join()


def test_guard_rule_names_are_documented():
    assert {"sandbox-net", "sandbox-process", "sandbox-file", "sandbox-ctypes"} <= set(
        rules.GUARD_RULES
    )
    assert "sandbox-introspection" in rules.GUARD_RULES


REAL_CANDIDATES_HARNESS = """
import importlib.util, json, os, sys
from pathlib import Path

import torch

from kernelwright.codegen import generate
from kernelwright.sandbox.task import build_inputs, build_reference, load_task, task_namespace
from kernelwright.sandbox.candidate.tritoncompat import fix_interpreter_index
from kernelwright.sandbox.candidate.process import install_guard

fix_interpreter_index()  # as the worker does (triton 3.6's interpreter with NumPy 2.4)
home, private = Path(os.environ["KW_HOME"]), Path(os.environ["KW_PRIVATE"])
tasks = json.loads(os.environ["KW_TASKS"])
sources = {t: generate(t).source for t in tasks}  # before the guard: the codegen is ours
guard = install_guard(home, private)
for i, (path, shapes) in enumerate(tasks.items()):
    ns = task_namespace(load_task(path), shapes)
    ref = build_reference(ns, torch.float32, torch.device("cpu"), seed=1)
    (home / f"cand{i}.py").write_text(sources[path])
    spec = importlib.util.spec_from_file_location(f"cand{i}", home / f"cand{i}.py")
    module = importlib.util.module_from_spec(spec)
    with guard.active():
        spec.loader.exec_module(module)
        model = module.ModelNew(*ns["get_init_inputs"]())
    model.load_state_dict(ref.state_dict(), strict=False)
    for seed in range(2):
        inputs = build_inputs(ns, torch.float32, torch.device("cpu"), seed)
        with guard.active(), torch.no_grad():
            model(*inputs)
print(json.dumps({
    "violations": [v.message for v in guard.violations],
    "candidate_generated": sorted(
        {f"{c.co_filename}:{c.co_name}" for c in guard._candidate_generated.values()}
    ),
}))
"""


@pytest.mark.slow
def test_library_code_generated_during_real_candidates_is_not_the_candidates(tmp_path):
    """Two of the fusion codegen's candidates run under the guard (the Triton interpreter here).

    With every exec during a candidate's call counted as the candidate's, the methods of
    dataclasses in modules first imported then (`__init__`, `__eq__`, `__setattr__`...) were
    registered as candidate code (this test fails so on b60ce66); on the H200 the evaluator's own
    later calls ran through such frames, and torch's guard code generated under them was refused
    as introspection.
    """
    home, private = tmp_path / "home", tmp_path / "evaluator"
    home.mkdir()
    private.mkdir()
    root = Path(__file__).resolve().parents[1] / "benchmarks" / "level1"
    tasks = {
        str(root / "35_frobenius_normalize.py"): {
            "batch_size": 2,
            "channels": 4,
            "height": 8,
            "width": 8,
        },
        str(root / "31_prod_rows.py"): {"batch_size": 4, "dim": 64},
    }
    (tmp_path / "run.py").write_text(REAL_CANDIDATES_HARNESS)
    env = dict(
        os.environ,
        KW_HOME=str(home),
        KW_PRIVATE=str(private),
        KW_TASKS=json.dumps(tasks),
        TRITON_INTERPRET="1",
        CUDA_VISIBLE_DEVICES="",
    )
    report = run_json(tmp_path / "run.py", env, timeout=300)
    assert report["violations"] == []
    assert report["candidate_generated"] == []
