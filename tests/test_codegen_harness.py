"""Shared checks for the fusion codegen tests: run a generated candidate against its Model.

Kept in a test module (it holds tests of its own too) so the other test_codegen_*.py files can
import it; pytest puts tests/ on sys.path.
"""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.codegen import generate
from kernelwright.sandbox.judge.compare import TOLERANCES
from kernelwright.sandbox.task import (
    build_inputs,
    build_reference,
    load_parameters,
    load_task,
    task_namespace,
)

TASKS = Path(__file__).parent / "tasks"
ROOT = Path(__file__).parent.parent
TOL = TOLERANCES  # the evaluator's: fp32 1e-4, fp16 1e-2, bf16 5e-2
# The same checks compile real kernels where there is a GPU (pytest on the H200), and run the
# Triton interpreter on CPU otherwise (tests/conftest.py sets TRITON_INTERPRET=1 then).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
_counter = itertools.count()


def task_path(name: str) -> str:
    return str(TASKS / f"fusion_{name}.py")


def candidate_module(source: str, tmp_path: Path) -> Any:
    """Import the candidate from a file (Triton reads kernel source through inspect)."""
    path = tmp_path / f"candidate_{next(_counter)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def check_ruff(source: str, tmp_path: Path) -> None:
    """The candidate passes `ruff check` and `ruff format --check` with the project's config.

    Skipped where ruff is not installed (the GPU image); the CPU CI has it.
    """
    if shutil.which("ruff") is None:
        return
    path = tmp_path / f"ruff_{next(_counter)}.py"
    path.write_text(source)
    config = ["--config", str(ROOT / "pyproject.toml")]
    for cmd in (
        ["ruff", "check", *config, str(path)],
        ["ruff", "format", *config, "--diff", str(path)],
    ):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def compare_outputs(out: Any, ref: Any, dtype: torch.dtype) -> None:
    if isinstance(ref, (tuple, list)):
        assert isinstance(out, (tuple, list)) and len(out) == len(ref)
        for o, r in zip(out, ref):
            compare_outputs(o, r, dtype)
        return
    assert type(out) is torch.Tensor
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
    atol, rtol = TOL.get(dtype, (1e-4, 1e-4))
    if ref.dtype.is_floating_point:
        torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    else:
        assert torch.equal(out, ref)


def check_equal(
    name: str,
    tmp_path: Path,
    shapes: list[dict[str, int]],
    *,
    dtype: torch.dtype = torch.float32,
    modes: tuple[bool, ...] = (True,),
    inputs_hook=None,
    calls: int = 1,
    configs: tuple[dict[str, int], ...] = ({},),
    ruff: bool = True,
) -> str:
    """Generate a candidate for task `name`, check ruff (unless `ruff` is False: a task whose
    own lines are copied as written), and compare with Model at each shape (and train/eval
    mode), buffers included; returns the source."""
    path = task_path(name)
    result = generate(path, dtype=DTYPE_NAMES[dtype])
    assert result.source is not None, result.reason
    if ruff:
        check_ruff(result.source, tmp_path)
    module = candidate_module(result.source, tmp_path)
    task = load_task(path)
    defaults = {k: getattr(module, k) for config in configs for k in config}
    for overrides, train, config in itertools.product(shapes, modes, configs):
        for k, v in {**defaults, **config}.items():
            setattr(module, k, v)  # the launchers read the module's tunables at call time
        ns = task_namespace(task, overrides)
        ref = build_reference(ns, dtype, DEVICE, seed=1)
        new = module.ModelNew(*ns["get_init_inputs"]()).to(device=DEVICE, dtype=dtype)
        assert load_parameters(ref, new) == []
        ref.train(train)
        new.train(train)
        for call in range(calls):
            inputs = build_inputs(ns, dtype, DEVICE, seed=10 + call)
            if inputs_hook is not None:
                inputs = inputs_hook(inputs)
            with torch.no_grad():
                expected = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
                got = new(*inputs)
            compare_outputs(got, expected, dtype)
        for (rn, rb), (nn_, nb) in zip(ref.named_buffers(), new.named_buffers()):
            assert rn == nn_
            compare_outputs(nb, rb, dtype)
    return result.source


def test_harness_rejects_a_wrong_output(tmp_path):
    with pytest.raises(AssertionError):
        compare_outputs(torch.ones(3), torch.zeros(3), torch.float32)
