"""The judge, version 3: what one candidate does to the sandbox never reaches the next one.

Each attacker runs before an honest candidate on a judge of one worker (one zygote): the honest
one must still pass, and the attacker must have been stopped for the reason the design gives.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelwright.sandbox import EvalConfig, EvalPool
from kernelwright.sandbox.crossing import bwrap

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_zoo import AFFINE, HONEST_AFFINE, ZOO  # noqa: E402

# Static checks off: the operating-system layers must hold on their own.
RUNTIME = EvalConfig(
    timing=False, compile_baseline=False, timeout_s=60.0, unsafe_skip_static_checks=True
)
SANDBOXES = [
    pytest.param(
        True,
        id="bwrap",
        marks=pytest.mark.skipif(not bwrap.probe().works, reason="bubblewrap cannot run here"),
    ),
    pytest.param(False, id="plain-fork"),
]


@pytest.mark.slow
@pytest.mark.parametrize("os_sandbox", SANDBOXES)
def test_a_candidate_cannot_write_the_zygote_memory(os_sandbox):
    config = RUNTIME.replace(os_sandbox=os_sandbox)
    with EvalPool(workers=1) as pool:
        attacker = pool.submit(AFFINE, (ZOO / "zygote_mem_write.py").read_text(), config)
        honest = pool.submit(AFFINE, HONEST_AFFINE, config)
        a, h = attacker.result(), honest.result()
    assert "refused (PermissionError" in a.message, a.summary()
    assert "overwrote" not in a.message, a.summary()
    assert h.status == "ok", h.summary()


# Honest, and looks for what an earlier candidate could have left where its process imports
# from (os.path.exists does not pass the audit hook); raises if anything is there.
FINDS_NO_PLANT = HONEST_AFFINE.replace(
    "        y = torch.empty_like(x)",
    """        import os
        import sys
        home = os.getcwd()
        places = [home, os.path.dirname(home), "/tmp", *sys.path]
        places.append(os.path.join(os.path.dirname(os.path.dirname(home)), "zygote"))
        found = [p for p in places if p and os.path.exists(os.path.join(p, "einops.py"))]
        if found:
            raise RuntimeError(f"an earlier candidate's einops.py is in {found}")
        y = torch.empty_like(x)""",
)


@pytest.mark.slow
@pytest.mark.skipif(not bwrap.probe().works, reason="bubblewrap cannot run here")
def test_a_module_planted_by_a_candidate_is_seen_by_no_later_one():
    with EvalPool(workers=1) as pool:
        attacker = pool.submit(AFFINE, (ZOO / "plant_import_module.py").read_text(), RUNTIME)
        honest = pool.submit(AFFINE, FINDS_NO_PLANT, RUNTIME)
        a, h = attacker.result(), honest.result()
        assert not any(pool.root.glob("**/einops.py"))
    assert "planted nowhere but its home" in a.message, a.summary()
    assert "candidates: refused" in a.message and "zygote: refused" in a.message, a.message
    assert "/tmp: refused" in a.message, a.message
    assert h.status == "ok", h.summary()


# Leaves a file in its home and a process in a session of its own that sleeps, with the guard
# off (fork and exec are refused there); the candidate after it looks for both.
LEAVES_A_PROCESS = HONEST_AFFINE.replace(
    "class ModelNew(nn.Module):",
    """import os
import sys

checks = sys.modules["kernelwright.sandbox.candidate.guard"]
saved, checks._GUARD = checks._GUARD, None
open("left_behind.txt", "w").write(os.getcwd())
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "kw-stray"])
    os._exit(0)
os.wait()
checks._GUARD = saved


class ModelNew(nn.Module):""",
)
FINDS_NO_PROCESS = HONEST_AFFINE.replace(
    "        y = torch.empty_like(x)",
    """        import os
        import sys
        checks = sys.modules["kernelwright.sandbox.candidate.guard"]
        saved, checks._GUARD = checks._GUARD, None
        try:
            strays = []
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if b"kw-stray" in f.read():
                            strays.append(pid)
                except OSError:
                    pass
            homes = [d for d in os.listdir(os.path.dirname(os.getcwd())) if d.startswith("cand-")]
            homes = [d for d in homes if not d.endswith(".log")]
        finally:
            checks._GUARD = saved
        if strays or len(homes) != 1:
            raise RuntimeError(f"left behind: processes {strays}, homes {homes}")
        y = torch.empty_like(x)""",
)


@pytest.mark.slow
@pytest.mark.parametrize("os_sandbox", SANDBOXES)
def test_a_candidate_home_and_processes_are_gone_before_the_next_verdict(os_sandbox):
    config = RUNTIME.replace(os_sandbox=os_sandbox)
    with EvalPool(workers=1) as pool:
        first = pool.submit(AFFINE, LEAVES_A_PROCESS, config)
        second = pool.submit(AFFINE, FINDS_NO_PROCESS, config)
        a, b = first.result(), second.result()
    assert a.status == "ok", a.summary()
    assert b.status == "ok", b.summary()


@pytest.mark.slow
def test_host_memory_is_capped_on_the_candidate_process_and_polled_by_the_judge():
    source = (ZOO / "host_memory_hog.py").read_text()
    config = EvalConfig(timing=False, compile_baseline=False, timeout_s=60.0, host_memory_gb=1.5)
    with EvalPool(workers=1) as pool:
        capped = pool.submit(AFFINE, source, config).result()
        polled = pool.submit(AFFINE, source, config.replace(host_rlimit=False)).result()
        honest = pool.submit(AFFINE, HONEST_AFFINE, config).result()
    assert (capped.status, capped.rule) == ("runtime_error", "memory"), capped.summary()
    assert "RLIMIT_DATA" in capped.message and "1.5 GB" in capped.message, capped.message
    # Without the rlimit, the judge's polling of the process's resident memory kills it.
    assert (polled.status, polled.rule) == ("crashed", "memory"), polled.summary()
    assert "host memory" in polled.message
    assert honest.status == "ok", honest.summary()
