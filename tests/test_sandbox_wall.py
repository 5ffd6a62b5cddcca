"""The judge, version 3: what one candidate does to the sandbox never reaches the next one.

Each attacker runs before an honest candidate on a judge of one worker (one zygote): the honest
one must still pass, and the attacker must have been stopped for the reason the design gives.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelwright.sandbox import EvalConfig, EvalPool, bwrap

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
