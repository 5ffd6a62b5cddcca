"""The newcomer's `pytest -q` on a CPU machine stays quiet: no 64-line fusion coverage block among
the dots, and the skips (every GPU test, the Chromium rendering test) summed up by reason in a
few lines instead of one line per skipped test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent


def test_skips_are_summed_up_by_reason(pytester):
    pytester.makepyfile(
        test_some="""
        import pytest

        @pytest.mark.parametrize("n", range(5))
        def test_gpu(n):
            pytest.skip("needs a CUDA GPU (run `pytest -m gpu` on one)")

        def test_browser():
            pytest.skip("no chromium binary (.ci/chromium.sh installs Debian's chromium)")

        @pytest.mark.parametrize("n", range(6))
        def test_each_its_own(n):
            pytest.skip(f"reason {n}")

        def test_ok():
            pass
        """
    )
    result = pytester.runpytest("-q", "-rfE", "-p", "quiet_summary")
    out = result.stdout.str()
    assert "SKIPPED [" not in out  # no line per skipped test
    assert "5 skipped: needs a CUDA GPU (run `pytest -m gpu` on one)" in out
    assert "1 skipped: no chromium binary (.ci/chromium.sh installs Debian's chromium)" in out
    assert "4 skipped for 4 other reasons (`pytest -rs` lists each skip)" in out
    # -rs still lists each skip, as pytest does.
    assert "SKIPPED [1]" in pytester.runpytest("-q", "-rs", "-p", "quiet_summary").stdout.str()


@pytest.mark.slow
def test_the_fusion_coverage_list_prints_only_with_verbose(tmp_path):
    test = "tests/test_codegen_benchmarks.py::test_coverage_report"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "ignore", test]
    quiet = subprocess.run([*cmd, "-q"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert quiet.returncode == 0, quiet.stdout[-2000:]
    assert "fusion coverage:" not in quiet.stdout
    assert len(quiet.stdout.strip().splitlines()) <= 3, quiet.stdout
