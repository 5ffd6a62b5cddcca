"""The runtime guard's counters for Prometheus (prometheus-client, the `prometheus` extra).

A collector reads each guard's counters when the registry is scraped, so a call pays nothing for
Prometheus. One collector per registry holds every guard exposed there; labels are the guard's
name and kernel version only (nothing unbounded):

    kernelwright_guard_calls_total{guard="gelu",version="3"} 120000
    kernelwright_guard_fallbacks_total, _mismatches_total, _shadow_checks_total, _errors_total,
    _nonfinite_total, _out_of_envelope_total, _reference_errors_total
    kernelwright_guard_falling_back{...} 0 or 1
    kernelwright_guard_call_seconds (histogram: host time of the unsampled calls timed, one in
    the guard's host_time_every, 16 by default)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

try:
    from prometheus_client import REGISTRY
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "the runtime guard's Prometheus metrics need prometheus-client: "
        "pip install 'kernelwright[prometheus]'"
    ) from e


class Guard(Protocol):
    """What a scrape reads of a guard (guard.Guard): its labels and a snapshot of its figures."""

    name: str
    version: str

    def metrics(self) -> tuple[dict[str, int], Any, bool]: ...


PREFIX = "kernelwright_guard_"
_HELP = {
    "calls": "Calls of the guarded module.",
    "shadow_checks": "Calls also run on the reference and compared.",
    "mismatches": "Shadow checks whose outputs differed beyond the tolerance.",
    "nonfinite": "Calls whose kernel output held NaN/Inf where the reference's did not.",
    "errors": "Calls on which the kernel raised.",
    "fallbacks": "Calls that returned the reference's result.",
    "out_of_envelope": "Calls with inputs outside the verified envelope (run on the reference).",
    "reference_errors": "Shadow checks on which the reference itself raised.",
}
_collectors: weakref.WeakKeyDictionary[Any, _GuardCollector] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class _GuardCollector:
    def __init__(self) -> None:
        self.guards: weakref.WeakSet[Guard] = weakref.WeakSet()

    def describe(self) -> list:
        return []  # names are fixed and registered once per registry; skip the auto-describe

    def collect(self) -> Iterator[Any]:
        snapshots = [(g.name, g.version, *g.metrics()) for g in list(self.guards)]
        for key, text in _HELP.items():
            family = CounterMetricFamily(PREFIX + key, text, labels=["guard", "version"])
            for name, version, counts, _, _ in snapshots:
                family.add_metric([name, version], counts[key])
            yield family
        falling = GaugeMetricFamily(
            PREFIX + "falling_back",
            "1 while every call runs the reference (after a fault, until reset).",
            labels=["guard", "version"],
        )
        hist = HistogramMetricFamily(
            PREFIX + "call_seconds",
            "Host wall time of the kernel's unsampled calls (no device synchronisation).",
            labels=["guard", "version"],
        )
        for name, version, _, host, tripped in snapshots:
            falling.add_metric([name, version], 1.0 if tripped else 0.0)
            hist.add_metric([name, version], host.cumulative(), sum_value=host.sum)
        yield falling
        yield hist


def register(guard: Guard, registry: Any = None) -> None:
    """Expose `guard` in `registry` (prometheus_client's default REGISTRY when None)."""
    registry = REGISTRY if registry is None else registry
    with _lock:
        collector = _collectors.get(registry)
        if collector is None:
            collector = _collectors[registry] = _GuardCollector()
            registry.register(collector)
        collector.guards.add(guard)
