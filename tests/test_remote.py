"""The candidate's process and its sandbox: what held is said, and each candidate starts clean."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelwright.sandbox import EvalConfig, EvalPool
from kernelwright.sandbox.crossing import bwrap

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_zoo import AFFINE, HONEST_AFFINE  # noqa: E402

BASE = EvalConfig(timing=False, compile_baseline=False, timeout_s=60.0)

# Writes a file into its home and a module-level mark into the already imported torch; the next
# candidate must see neither.
LEAVE_BEHIND = HONEST_AFFINE.replace(
    "class ModelNew(nn.Module):",
    """import os
open("left_behind.txt", "w").write("x")
torch._kw_left_behind = True


class ModelNew(nn.Module):""",
)
SEE_LEFTOVERS = HONEST_AFFINE.replace(
    "        y = torch.empty_like(x)",
    """        import os
        if os.path.exists("left_behind.txt") or getattr(torch, "_kw_left_behind", False):
            raise RuntimeError("the previous candidate's leftovers are here")
        y = torch.empty_like(x)""",
)


@pytest.mark.slow
def test_a_candidate_finds_nothing_of_the_one_before():
    with EvalPool(workers=1) as pool:
        first = pool.submit(AFFINE, LEAVE_BEHIND, BASE.replace(unsafe_skip_static_checks=True))
        second = pool.submit(AFFINE, SEE_LEFTOVERS, BASE.replace(unsafe_skip_static_checks=True))
        assert first.result().status in ("ok", "rejected"), first.result().summary()
        assert second.result().status == "ok", second.result().summary()


@pytest.mark.slow
def test_without_the_os_sandbox_the_result_says_which_layers_held():
    with EvalPool(workers=1) as pool:
        result = pool.submit(AFFINE, HONEST_AFFINE, BASE.replace(os_sandbox=False)).result()
    assert result.status == "ok", result.summary()
    assert "bubblewrap" not in result.environment.isolation
    assert "process" in result.environment.isolation
    assert "no operating-system sandbox" in result.environment.sandbox_note
    assert any("no operating-system sandbox" in n for n in result.notes)


@pytest.mark.skipif(not bwrap.probe().works, reason="bubblewrap cannot run here")
@pytest.mark.slow
def test_under_bubblewrap_the_layers_are_listed():
    with EvalPool(workers=1) as pool:
        result = pool.submit(AFFINE, HONEST_AFFINE, BASE).result()
    assert result.status == "ok", result.summary()
    layers = set(result.environment.isolation)
    assert {"bubblewrap", "pid-namespace", "netns", "no-secrets"} <= layers
    assert ("seccomp" in layers) == (bwrap.seccomp_filter() is not None)
    assert result.environment.sandbox_note == ""


def test_the_seccomp_filter_compiles_and_refuses_the_listed_calls():
    program = bwrap.seccomp_filter()
    if program is None:
        pytest.skip("libseccomp (pyseccomp) is not available here")
    assert len(program) % 8 == 0 and len(program) > 8 * len(bwrap.DENIED_SYSCALLS) // 2


def test_the_candidate_process_inherits_only_its_allowlist(tmp_path):
    """The zygote's environment: isolation.py's allowlist, narrower than the worker's."""
    from kernelwright.sandbox.judge.remote import _sandbox_env

    parent = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "KERNELWRIGHT_CACHE_DIR": "/cache",
        "TORCHINDUCTOR_CACHE_DIR": "/inductor",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "TRITON_CACHE_DIR": "/triton",
        "TRITON_API_KEY": "sk-nope",
        "OPENAI_API_KEY": "sk-nope",
    }
    env = _sandbox_env(parent, "cpu", tmp_path)
    assert {"LANG", "NVIDIA_VISIBLE_DEVICES", "TRITON_CACHE_DIR"} <= set(env)
    assert not {
        "TERM",
        "CUDA_DEVICE_ORDER",
        "KERNELWRIGHT_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
    } & set(env)
    assert not any("sk-" in value for value in env.values())
    assert env["HOME"] == str(tmp_path) and env["CUDA_VISIBLE_DEVICES"] == ""
