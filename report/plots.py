"""The reports' PNG plots, drawn with matplotlib's Agg through its object API (no pyplot, no
display): best speedup per round, per-task speedups of a suite, night-over-night trends."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..decisions import finite
from ..sandbox.static.pyparse import serialised
from .format import series_key, series_name

# matplotlib's default first colour: the main series of every plot (the HTML test looks for it).
PLOT_BLUE = "#1f77b4"


PLOT_ORANGE = "#ff7f0e"


PLOT_GREEN = "#2ca02c"


PLOT_RED = "#d62728"


def _figure(width: float, height: float):
    with serialised():  # matplotlib's first import parses Python (sandbox/static/pyparse.py)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

    # Agg through the object API: no pyplot, no global backend switch, no display needed.
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _nan(value: Any) -> float:
    v = finite(value)
    return v if v is not None else math.nan


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#555")


def plot_rounds(rounds: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Best speedup per round (vs eager and vs torch.compile) and the best so far."""
    fig = _figure(7.5, 3.8)
    ax = fig.add_subplot()
    xs = [r["round"] for r in rounds]
    eager = [_nan(r.get("best_speedup_eager")) for r in rounds]
    compiled = [_nan(r.get("best_speedup_compiled")) for r in rounds]
    so_far = [_nan(r.get("best_so_far_eager")) for r in rounds]
    ax.axhline(1.0, color="#777", linestyle="--", linewidth=1, label="reference (1x)")
    if any(not math.isnan(v) for v in eager + compiled):
        ax.step(
            xs, so_far, where="post", color=PLOT_BLUE, linewidth=2, label="best so far vs eager"
        )
        ax.plot(xs, eager, "o", color=PLOT_BLUE, markersize=8, label="round best vs eager")
        ax.plot(xs, compiled, "s", color=PLOT_ORANGE, markersize=7, label="vs torch.compile")
        ax.legend(loc="best", fontsize=8)
    else:
        _no_data(ax, "no meaningful timings (no correct candidate, or the Triton interpreter)")
    ax.set_xlabel("round")
    ax.set_ylabel("speedup (x)")
    if xs:
        ax.set_xticks(xs)
    ax.set_title("Best verified speedup per round", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_suite(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Per-task speedup bars vs eager and vs torch.compile, roofline fraction as a line."""
    n = len(rows)
    fig = _figure(min(max(6.0, 0.45 * n + 2.5), 40.0), 4.5)
    ax = fig.add_subplot()
    xs = list(range(n))
    w = 0.4
    eager = [_nan(r["speedup_eager"]) if r["correct"] else math.nan for r in rows]
    compiled = [_nan(r["speedup_compiled"]) if r["correct"] else math.nan for r in rows]
    ax.bar([x - w / 2 for x in xs], eager, w, color=PLOT_BLUE, label="vs eager")
    ax.bar([x + w / 2 for x in xs], compiled, w, color=PLOT_ORANGE, label="vs torch.compile")
    ax.axhline(1.0, color="#777", linestyle="--", linewidth=1)
    for x, r in zip(xs, rows):
        if not r["correct"]:
            ax.text(x, 0.02, "✗", transform=ax.get_xaxis_transform(), ha="center", color=PLOT_RED)
    ax.set_xticks(xs)
    ax.set_xticklabels([r["task"] for r in rows], rotation=60, ha="right", fontsize=8)
    ax.set_xlim(-0.6, max(n, 1) - 0.4)  # tasks without bars keep their slot
    ax.set_ylabel("speedup (x); ✗ = not correct")
    roof = ax.twinx()
    fractions = [_nan(r.get("roofline_fraction")) if r["correct"] else math.nan for r in rows]
    roof.plot(xs, fractions, "-o", color=PLOT_GREEN, label="fraction of roofline")
    roof.set_ylim(0, 1.05)
    roof.set_ylabel("fraction of roofline")
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = roof.get_legend_handles_labels()
    # Above the axes: inside, it would hide the first tasks' bars.
    ax.legend(
        handles + more_handles,
        labels + more_labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    if not any(not math.isnan(v) for v in eager + compiled):
        _no_data(ax, "no meaningful timings")
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_nightly(history: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Night-over-night speedup vs eager per task (and GPU); failed nights as black crosses."""
    nights = sorted({h["night"] for h in history})
    index = {night: i for i, night in enumerate(nights)}
    fig = _figure(max(6.0, min(0.6 * len(nights) + 3, 30.0)), 4.0)
    ax = fig.add_subplot()
    series: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for h in history:
        series.setdefault(series_key(h), []).append(h)
    several_gpus = len({key[2] for key in series}) > 1
    for key, rows in sorted(series.items(), key=lambda kv: (series_name(kv[1][0]), kv[0])):
        rows = sorted(rows, key=lambda h: h["night"])
        ok = [h for h in rows if h["status"] == "ok"]
        label = series_name(rows[0]) + (f" @ {key[2]}" if several_gpus else "")
        ax.plot(
            [index[h["night"]] for h in ok],
            [_nan(h.get("speedup_eager")) for h in ok],
            "-o",
            label=label,
        )
        failed = [index[h["night"]] for h in rows if h["status"] != "ok"]
        ax.plot(failed, [0.0] * len(failed), "x", color="black", markersize=10)
    ax.axhline(1.0, color="#777", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(nights)))
    ax.set_xticklabels(nights, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("speedup vs eager (x)")
    ax.set_title("Night over night (✗ at 0: the kernel failed that night)", fontsize=11)
    if 0 < len(series) <= 12:  # more would hide the lines; the table names them all
        ax.legend(loc="best", fontsize=8)
    if not history:
        _no_data(ax, "no nightly history yet")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return path
