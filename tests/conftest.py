"""Test setup: the Triton interpreter when there is no CUDA, and the `gpu` marker's skip."""

from __future__ import annotations

import os

# Must happen before any @triton.jit decorator runs, i.e. before test modules import kernels.
try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is a hard dependency
    _HAS_CUDA = False
if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

# The scripted OpenAI-compatible server every agent test talks to (tests/fake_openai.py), and the
# skips summed up by reason at the end (tests/quiet_summary.py).
pytest_plugins = ["fake_openai", "quiet_summary"]


def pytest_collection_modifyitems(config, items):
    if _HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
