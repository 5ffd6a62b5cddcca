"""The runtime guard's counters in Prometheus: a real HTTP scrape on 127.0.0.1, parsed."""

from __future__ import annotations

import socket
import urllib.request

import pytest
import torch
import torch.nn.functional as F
from torch import nn

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="prometheus-client is not installed (the `prometheus` extra)"
)
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kernelwright.runtime import guard  # noqa: E402


class Silu(nn.Module):
    def __init__(self, delta: float = 0.0):
        super().__init__()
        self.delta = delta

    def forward(self, x):
        return F.silu(x) + self.delta


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_over_http_reads_every_guards_counters():
    registry = prometheus_client.CollectorRegistry()
    good = guard(Silu(), Silu(), shadow_rate=0.5, name="silu", version="4", host_time_every=1)
    bad = guard(Silu(), Silu(delta=1.0), shadow_rate=1.0, name="silu-bad", version="1")
    good.expose_prometheus(registry)
    bad.expose_prometheus(registry)
    x = torch.randn(4, 4)
    for _ in range(40):
        good(x)
    for _ in range(3):
        bad(x)
    port = _free_port()
    server, thread = prometheus_client.start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        samples = _scrape(port)
        g = (("guard", "silu"), ("version", "4"))
        b = (("guard", "silu-bad"), ("version", "1"))
        assert samples[("kernelwright_guard_calls_total", g)] == 40
        checks = good.stats()["shadow_checks"]
        assert 0 < checks < 40
        assert samples[("kernelwright_guard_shadow_checks_total", g)] == checks
        assert samples[("kernelwright_guard_mismatches_total", g)] == 0
        assert samples[("kernelwright_guard_falling_back", g)] == 0
        assert samples[("kernelwright_guard_calls_total", b)] == 3
        assert samples[("kernelwright_guard_mismatches_total", b)] == 1
        assert samples[("kernelwright_guard_fallbacks_total", b)] == 3
        assert samples[("kernelwright_guard_falling_back", b)] == 1
        assert samples[("kernelwright_guard_call_seconds_count", g)] == 40 - checks
        assert samples[
            ("kernelwright_guard_call_seconds_bucket", tuple(sorted((*g, ("le", "+Inf")))))
        ] == (40 - checks)
        assert samples[("kernelwright_guard_call_seconds_sum", g)] > 0
        good(x)  # counters move between scrapes
        assert _scrape(port)[("kernelwright_guard_calls_total", g)] == 41
    finally:
        server.shutdown()
        thread.join(timeout=10)
