"""Run, suite and nightly reports: Markdown, JSON, PNG plots (matplotlib's Agg) and static HTML.

Every report is written from data on disk (a run directory, suite rows, nightly history) so it can
be regenerated at any time. The HTML pages are self-contained: CSS inline, plots embedded as base64
PNGs, kernels highlighted here in Python, and a Content-Security-Policy that forbids any network
or script, so a page opens the same from a laptop, a CI artifact or an air-gapped GPU box.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import datetime as dt
import html
import json
import keyword
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .sandbox.pyparse import serialised
from .sandbox.results import STATUSES, EvalResult, fault_of

# KernelBench's thresholds: fast_p is the fraction of tasks that are correct and more than p times
# faster than the baseline; fast_0 is the correctness rate.
FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)

# Night-over-night, a kernel is a regression when its median time grows by more than this. Medians
# of 50 interleaved, L2-flushed calls move a few percent between nights on a quiet GPU; 10% is
# clear of that noise and still catches a lost fusion or a bad autotune pick.
NIGHTLY_SLOWDOWN = 0.10

INTERPRETER_NOTE = (
    "Times are not meaningful: this run used the Triton interpreter (TRITON_INTERPRET=1, no GPU), "
    "which checks correctness only. Re-run on a CUDA GPU to measure speedups."
)

# matplotlib's default first colour: the main series of every plot (the HTML test looks for it).
PLOT_BLUE = "#1f77b4"
PLOT_ORANGE = "#ff7f0e"
PLOT_GREEN = "#2ca02c"
PLOT_RED = "#d62728"


# -- small formatting helpers ---------------------------------------------------------------------


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _x(value: Any) -> str:
    v = _finite(value)
    return f"{v:.2f}x" if v is not None else "–"


def _pct(value: Any) -> str:
    v = _finite(value)
    return f"{v:.0%}" if v is not None else "–"


def _num(value: Any) -> str:
    v = _finite(value)
    if v is None:
        return "–"
    return f"{int(v):,}" if v == int(v) else f"{v:,.2f}"


def _usd(value: Any) -> str:
    v = _finite(value)
    return f"${v:.4f}" if v is not None else "–"


def _ms(value: Any) -> str:
    v = _finite(value)
    return f"{v:.4g} ms" if v is not None else "–"


def _statuses_text(counts: Mapping[str, int]) -> str:
    order = [s for s in STATUSES if s in counts] + sorted(set(counts) - set(STATUSES))
    return ", ".join(f"{counts[s]} {s}" for s in order) or "none"


def _json_safe(value: Any) -> Any:
    """Plain JSON: dataclasses as dicts, non-finite floats as None (JSON has no NaN)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json_safe(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def _write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(_json_safe(data), indent=2, allow_nan=False) + "\n")
    return path


def _read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (a run killed mid-write)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# -- Markdown -------------------------------------------------------------------------------------


def _md_cell(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- HTML -----------------------------------------------------------------------------------------


class _Html(str):
    """Text that is already HTML (escaped where needed): inserted as is."""


def _h(value: Any) -> str:
    return value if isinstance(value, _Html) else html.escape(str(value), quote=True)


def _html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> _Html:
    head = "".join(f"<th>{_h(h)}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>" for row in rows)
    klass = f' class="{_h(cls)}"' if cls else ""
    return _Html(f"<table{klass}>{thead}<tbody>{body}</tbody></table>")


def _badge(status: str) -> _Html:
    kind = "ok" if status == "ok" else "pending" if status in ("pending", "duplicate") else "bad"
    return _Html(f'<span class="badge {kind}">{_h(status)}</span>')


def _img(path: Path, alt: str) -> _Html:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return _Html(f'<img class="plot" alt="{_h(alt)}" src="data:image/png;base64,{data}">')


_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a;
       background: #fafbfc; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 24px; margin: 8px 0 12px; } h2 { font-size: 18px; margin: 28px 0 8px; }
p.verdict { font-size: 16px; background: #fff; border-left: 4px solid #556; padding: 10px 14px; }
p.note { background: #fff6dd; border-left: 4px solid #c90; padding: 8px 14px; }
table { border-collapse: collapse; background: #fff; margin: 6px 0; font-size: 14px; }
th, td { border: 1px solid #d6dae0; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.num, th.num { text-align: right; }
.badge { border-radius: 4px; padding: 0 6px; font-size: 13px; }
.badge.ok { background: #dff3e4; color: #14532d; }
.badge.bad { background: #fde2e2; color: #7f1d1d; }
.badge.pending { background: #eceff3; color: #333; }
.regression { color: #b00020; font-weight: 600; }
img.plot { display: block; max-width: 100%; background: #fff; border: 1px solid #d6dae0; }
details { margin: 6px 0; background: #fff; border: 1px solid #d6dae0; border-radius: 4px; }
summary { cursor: pointer; padding: 6px 10px; font-family: ui-monospace, monospace; }
pre.code { margin: 0; padding: 10px 14px; overflow-x: auto; font: 13px/1.4 ui-monospace,
           "DejaVu Sans Mono", monospace; background: #f6f8fa; border-top: 1px solid #d6dae0; }
.kw { color: #a626a4; font-weight: 600; } .bi { color: #0e7490; } .tl { color: #c18401; }
.st { color: #50a14f; } .cm { color: #8a8f98; font-style: italic; } .nb { color: #986801; }
.dc { color: #4078f2; } .fn { color: #4078f2; font-weight: 600; }
"""

# No network, no scripts: only inline styles and data: images may load.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_h(title)}</title><style>{_CSS}</style></head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


# -- Python/Triton syntax highlighting ------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<cm>\#[^\n]*)
  | (?P<st>[rRbBuUfF]{0,2}(?:'''[\s\S]*?(?:'''|\Z)|\"\"\"[\s\S]*?(?:\"\"\"|\Z)
        |'(?:\\.|[^'\\\n])*(?:'|$)|"(?:\\.|[^"\\\n])*(?:"|$)))
  | (?P<dc>(?<![\w)\]])@[A-Za-z_][\w.]*)
  | (?P<tl>(?<![\w.])(?:tl|triton|libdevice)\b(?:\.[A-Za-z_]\w*)*)
  | (?P<nb>(?<![\w.])(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+
        |(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?))
  | (?P<name>[A-Za-z_]\w*)
    """,
    re.VERBOSE | re.MULTILINE,
)
_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_")) - _KEYWORDS


def highlight_python(source: str) -> str:
    """`source` as escaped HTML with <span> classes for keywords, strings, comments, numbers,
    builtins, decorators and Triton names (tl.*, triton.*). Never fails, even on broken code."""
    out: list[str] = []
    pos = 0
    after_def = False
    for m in _TOKEN.finditer(source):
        out.append(html.escape(source[pos : m.start()]))
        kind, text = m.lastgroup, m.group()
        if kind == "name":
            if after_def:
                kind = "fn"
            elif text in _KEYWORDS:
                kind = "kw"
            elif text in _BUILTINS:
                kind = "bi"
            else:
                kind = None
            after_def = text in ("def", "class")
        else:
            after_def = False
        escaped = html.escape(text)
        out.append(f'<span class="{kind}">{escaped}</span>' if kind else escaped)
        pos = m.end()
    out.append(html.escape(source[pos:]))
    return "".join(out)


def _kernel_block(title: str, source: str, status: str, *, open_: bool = False) -> _Html:
    attr = " open" if open_ else ""
    return _Html(
        f"<details{attr}><summary>{_h(title)} {_badge(status)}</summary>"
        f'<pre class="code"><code>{highlight_python(source)}</code></pre></details>'
    )


# -- plots ----------------------------------------------------------------------------------------


def _figure(width: float, height: float):
    with serialised():  # matplotlib's first import parses Python (sandbox/pyparse.py)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

    # Agg through the object API: no pyplot, no global backend switch, no display needed.
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _nan(value: Any) -> float:
    v = _finite(value)
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
        series.setdefault(_series_key(h), []).append(h)
    several_gpus = len({key[2] for key in series}) > 1
    for key, rows in sorted(series.items(), key=lambda kv: (_series_name(kv[1][0]), kv[0])):
        rows = sorted(rows, key=lambda h: h["night"])
        ok = [h for h in rows if h["status"] == "ok"]
        label = _series_name(rows[0]) + (f" @ {key[2]}" if several_gpus else "")
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


# -- what ran -------------------------------------------------------------------------------------


def _sizes_text(sizes: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "no size constants"


def _sized_by(run: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """Why the sizes are what they are: "task", "shape" or "shrink". run.json records it now;
    before, its notes said so (the shrink wrote its sizes into config.shapes too, so those alone
    cannot tell)."""
    if run.get("sized_by") in ("task", "shape", "shrink"):
        return str(run["sized_by"])
    if any("task shrunk to" in str(n) for n in run.get("notes") or []):
        return "shrink"
    return "shape" if config.get("shapes") else "task"


def judged_text(run: Mapping[str, Any], also_checked: Mapping[str, Any] | None = None) -> str:
    """What a run judged its candidates at: dtype, precision policy and the sizes actually used,
    with why they differ from the task's own (--shape, or the shrink for the CPU interpreter).

    'fp32, precision strict, at batch_size=32, dim=1536: shrunk for the Triton interpreter (no
    CUDA) from the task's batch_size=4096, dim=393216; also checked at batch_size=27, dim=1317'
    """
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    sizes = run.get("sizes") if isinstance(run.get("sizes"), Mapping) else {}
    own = run.get("task_sizes") if isinstance(run.get("task_sizes"), Mapping) else {}
    text = f"{config.get('dtype') or 'fp32'}, precision {config.get('precision') or 'strict'}"
    text += f", at {_sizes_text(sizes)}" if sizes else ""
    differ = bool(own) and dict(own) != dict(sizes)
    sized_by = _sized_by(run, config)
    if sized_by == "shrink":
        text += ": shrunk for the Triton interpreter (no CUDA)"
        text += f" from the task's {_sizes_text(own)}" if differ else ""
    elif sized_by == "shape":
        text += " (set with --shape" + (f"; the task's own: {_sizes_text(own)})" if differ else ")")
    elif sizes:
        text += " (the task's own sizes)"
    if also_checked:
        text += f"; also checked at {_sizes_text(also_checked)}"
    return text


# -- run reports ----------------------------------------------------------------------------------

_ROUND_DIR = re.compile(r"round_(\d+)$")
_CAND_DIR = re.compile(r"cand_(\d+)$")


def _numbered_dirs(parent: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    found = [(pattern.match(p.name), p) for p in parent.iterdir() if p.is_dir()]
    return sorted((int(m.group(1)), p) for m, p in found if m)


def _load_result(path: Path) -> EvalResult | None:
    data = _read_json(path)
    if not isinstance(data, dict):
        return None
    try:
        return EvalResult.from_dict(data)
    except (TypeError, ValueError, KeyError):
        return None


def _candidate_view(run_dir: Path, round_no: int, index: int, cand_dir: Path) -> dict[str, Any]:
    seed = _load_result(cand_dir / "result.json")
    kernel, tuned_kernel = cand_dir / "kernel.py", cand_dir / "tuned.py"
    # The sweep's variant, when it beat the seed, is the candidate's verdict (run.json and the
    # best say so too): the tables must not show the seed's figures beside the tuned best.
    tuned = _load_result(cand_dir / "tuned_result.json") if tuned_kernel.is_file() else None
    result = tuned or seed
    summary = result.summary() if result else "no result.json (not evaluated yet)"
    if tuned is not None and seed is not None:
        summary += f" (tuned by the sweep; the seed: {_x(_finite(seed.speedup_eager))} vs eager)"
    view: dict[str, Any] = {
        "round": round_no,
        "candidate": index,
        "dir": str(cand_dir.relative_to(run_dir)),
        "kernel": str(kernel.relative_to(run_dir)) if kernel.is_file() else None,
        "tuned_kernel": str(tuned_kernel.relative_to(run_dir)) if tuned is not None else None,
        "status": result.status if result else "pending",
        "rule": result.rule if result else None,
        "summary": summary,
        "speedup_eager": _finite(result.speedup_eager) if result else None,
        "speedup_compiled": _finite(result.speedup_compiled) if result else None,
        "roofline_fraction": _finite(result.roofline.fraction)
        if result and result.roofline
        else None,
        "timings_meaningful": bool(result and result.timings and result.timings.meaningful),
        "interpreter": bool(result and result.environment.interpreter),
        "environment": dataclasses.asdict(result.environment) if result else None,
        "note": result.timings.note if result and result.timings else "",
        # Whose verdict it is: an evaluator error is kernelwright's, not the candidate's.
        "fault": result.fault if result else None,
        "shapes_checked": [dict(s) for s in result.correctness.shapes]
        if result and result.correctness
        else [],
        **(_memory_fields(result) if result else {}),
    }
    return view


def _speed_key(view: Mapping[str, Any]) -> float:
    v = view.get("speedup_eager")
    return v if v is not None else -math.inf


def _best_of(views: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    ok = [v for v in views if v["status"] == "ok"]
    # max() keeps the first of equals: the earliest candidate wins a tie.
    return max(ok, key=_speed_key) if ok else None


def _plan_summary(run_dir: Path, round_no: int, from_run: Mapping[int, Mapping[str, Any]]) -> str:
    summary = from_run.get(round_no, {}).get("plan_summary")
    if summary:
        return str(summary)
    plan = _read_json(run_dir / f"round_{round_no:02d}" / "plan.json")
    if isinstance(plan, dict):
        for key in ("summary", "plan_summary", "rationale"):
            if plan.get(key):
                return str(plan[key])
    return ""


def _round_rows(
    run_dir: Path, views: Sequence[Mapping[str, Any]], run: Mapping[str, Any]
) -> list[dict[str, Any]]:
    from_run = {
        r["round"]: r for r in run.get("rounds") or [] if isinstance(r, dict) and "round" in r
    }
    numbers = sorted({v["round"] for v in views} | set(from_run))
    rows, best_so_far = [], None
    for n in numbers:
        in_round = [v for v in views if v["round"] == n]
        best = _best_of(in_round)
        eager = best["speedup_eager"] if best else None
        if eager is not None and (best_so_far is None or eager > best_so_far):
            best_so_far = eager
        rows.append(
            {
                "round": n,
                "candidates": len(in_round),
                "statuses": dict(Counter(v["status"] for v in in_round)),
                "best_candidate": best["candidate"] if best else None,
                "best_speedup_eager": eager,
                "best_speedup_compiled": best["speedup_compiled"] if best else None,
                "best_roofline_fraction": best["roofline_fraction"] if best else None,
                "best_so_far_eager": best_so_far,
                "plan_summary": _plan_summary(run_dir, n, from_run),
            }
        )
    return rows


def _best_entry(
    run: Mapping[str, Any], views: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The run's best: what run.json names (the agents decided), else the fastest ok candidate."""
    named = run.get("best") if isinstance(run.get("best"), dict) else None
    view = None
    if named is not None:
        view = next(
            (
                v
                for v in views
                if v["round"] == named.get("round") and v["candidate"] == named.get("candidate")
            ),
            None,
        )
    else:
        view = _best_of(views)
        if view is None:
            return None
    named = named or {}
    view = view or {}
    return {
        "round": named.get("round", view.get("round")),
        "candidate": named.get("candidate", view.get("candidate")),
        "path": named.get("path") or view.get("kernel"),
        "speedup_eager": _finite(named.get("speedup_eager", view.get("speedup_eager"))),
        "speedup_compiled": _finite(named.get("speedup_compiled", view.get("speedup_compiled"))),
        "roofline_fraction": _finite(named.get("roofline_fraction", view.get("roofline_fraction"))),
    }


def _parse_ts(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _events_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "events.jsonl"
    events = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill: the rest of the log still counts
            if isinstance(item, dict):
                events.append(item)
    stamps = [t for t in (_parse_ts(e.get("ts")) for e in events) if t is not None]
    return {
        "events": len(events),
        "duration_s": max(stamps) - min(stamps) if len(stamps) >= 2 else None,
        "by_kind": dict(Counter(str(e.get("event", "?")) for e in events)),
    }


def _verdict(data: Mapping[str, Any]) -> str:
    """The verdict paragraph, ending with what was judged (dtype, precision, sizes) and the
    evaluator errors that were kernelwright's fault and no candidate's."""
    text = _outcome(data)
    if data["stop_reason"] == "task-error":
        return text
    if data.get("evaluator_errors"):
        n = data["evaluator_errors"]
        text += (
            f" {n} evaluator error{'s' * (n != 1)} (kernelwright's fault, not the "
            f"candidate's: {'they were' if n != 1 else 'it was'} not judged)."
        )
    return f"{text} Judged in {data['judged']}."


def _outcome(data: Mapping[str, Any]) -> str:
    best, views = data["best"], data["candidates"]
    n_rounds, n_ok = len(data["rounds"]), sum(v["status"] == "ok" for v in views)
    counts = _statuses_text(Counter(v["status"] for v in views))
    detail = f" ({data['stop_detail']})" if data.get("stop_detail") else ""
    stop = f" Stopped: {data['stop_reason']}{detail}." if data.get("stop_reason") else ""
    tried = f"{len(views)} candidates over {n_rounds} round{'s' * (n_rounds != 1)} ({counts})"
    if data["stop_reason"] == "task-error":
        return (
            f"Task error: the task's reference itself fails, so no candidate could be judged "
            f"({data['stop_detail']})."
        )
    if not views:
        return f"No candidate was evaluated; the PyTorch reference stays.{stop}"
    if best is None:
        return f"No candidate passed verification: {tried}. Keep the PyTorch reference.{stop}"
    where = f"round {best['round']}, candidate {best['candidate']}"
    eager, compiled = best["speedup_eager"], best["speedup_compiled"]
    if eager is None:
        return (
            f"A verified kernel was found ({where}), but its speed is unknown: timings here are "
            f"not meaningful, so only correctness was checked. {n_ok} of {tried} were correct."
            f"{stop}"
        )
    roof = (
        f", at {_pct(best['roofline_fraction'])} of the roofline"
        if best["roofline_fraction"] is not None
        else ""
    )
    vs_compiled = f" and {_x(compiled)} vs torch.compile" if compiled is not None else ""
    if eager <= 1.0:
        return (
            f"No win: the best verified kernel ({where}) runs at {_x(eager)} of PyTorch eager"
            f"{vs_compiled}. Keep the PyTorch reference. {n_ok} of {tried} were correct.{stop}"
        )
    caveat = (
        " torch.compile is still faster: prefer it where it is available."
        if compiled is not None and compiled <= 1.0
        else ""
    )
    return (
        f"The best verified kernel ({where}) is {_x(eager)} faster than PyTorch eager"
        f"{vs_compiled}{roof}; it is saved as best.py. {n_ok} of {tried} were correct.{stop}"
        f"{caveat}"
    )


def _listed_candidates(run: Mapping[str, Any]) -> dict[tuple[int, int], Mapping[str, Any]]:
    """run.json's candidate rows (the agents' view: origin, idea, duplicates), by position."""
    rows = run.get("candidates") or []
    return {
        (r["round"], r["candidate"]): r
        for r in rows
        if isinstance(r, Mapping)
        and isinstance(r.get("round"), int)
        and isinstance(r.get("candidate"), int)
    }


def _unlisted_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate run.json lists with no directory on disk (skipped as a duplicate, say)."""
    return {
        "round": row["round"],
        "candidate": row["candidate"],
        "dir": None,
        "kernel": None,
        "tuned_kernel": None,
        "status": str(row.get("status") or "pending"),
        "rule": row.get("rule"),
        "summary": str(row.get("summary") or ""),
        "speedup_eager": _finite(row.get("speedup_eager")),
        "speedup_compiled": _finite(row.get("speedup_compiled")),
        "roofline_fraction": _finite(row.get("roofline_fraction")),
        "timings_meaningful": False,
        "interpreter": False,
        "environment": None,
        "note": "",
        "fault": None,
        "shapes_checked": [],
    }


def _skipped_events(run_dir: Path) -> dict[tuple[int, int], Mapping[str, Any]]:
    """Candidates the coder set aside without evaluation (a duplicate), from events.jsonl: what
    a run killed before its finalize (which writes run.json's candidates) still says of them."""
    found: dict[tuple[int, int], Mapping[str, Any]] = {}
    path = run_dir / "events.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("event") != "candidate.skipped":
            continue
        if isinstance(event.get("round"), int) and isinstance(event.get("index"), int):
            found[(event["round"], event["index"])] = event
    return found


def _duplicate_of(row: Mapping[str, Any]) -> str | None:
    """'round_01/cand_1' for a duplicate, from run.json's row or a candidate.skipped event."""
    if row.get("duplicate_of"):
        return str(row["duplicate_of"])
    match = re.match(r"same source as (round_\d+/cand_\d+)", str(row.get("summary") or ""))
    return match.group(1) if match else None


def _as_duplicate(view: dict[str, Any], of: str, views: Mapping[tuple[int, int], Any]) -> None:
    """A duplicate shows the candidate it repeats and that candidate's verdict, not "pending"."""
    match = re.match(r"round_(\d+)/cand_(\d+)$", of)
    earlier = views.get((int(match.group(1)), int(match.group(2)))) if match else None
    verdict = f": {earlier['summary']}" if earlier else ""
    view.update(
        status="duplicate",
        rule=earlier["rule"] if earlier else None,
        summary=f"duplicate of {of} (the same source; not evaluated again){verdict}",
        duplicate_of=of,
    )


def _all_candidates(run_dir: Path, run: Mapping[str, Any]) -> list[dict[str, Any]]:
    views = {
        (r, k): _candidate_view(run_dir, r, k, cand_dir)
        for r, round_dir in _numbered_dirs(run_dir, _ROUND_DIR)
        for k, cand_dir in _numbered_dirs(round_dir, _CAND_DIR)
    }
    listed = _listed_candidates(run)
    skipped = _skipped_events(run_dir)
    for key, row in listed.items():
        views.setdefault(key, _unlisted_view(row))
    for key, view in views.items():
        row = listed.get(key, {})
        view["origin"] = row.get("origin")
        view["idea"] = row.get("idea")
    for key, view in views.items():
        said = listed.get(key) or skipped.get(key) or {}
        of = _duplicate_of(said) if said.get("status") == "duplicate" else None
        if of and view["status"] in ("pending", "duplicate"):
            _as_duplicate(view, of, views)
    return [views[k] for k in sorted(views)]


def _timing_note(run: Mapping[str, Any], views: Sequence[Mapping[str, Any]]) -> str | None:
    """Why times are not meaningful, or None when they are. run.json's word (the agents knew
    whether CUDA was there) is taken first; otherwise the results say it."""
    env = run.get("environment") if isinstance(run.get("environment"), Mapping) else {}
    if "timing_meaningful" in run:
        meaningful = bool(run["timing_meaningful"])
    else:
        ok = [v for v in views if v["status"] == "ok"]
        interpreted = bool(env.get("interpreter")) or any(v["interpreter"] for v in views)
        meaningful = not interpreted and (not ok or any(v["timings_meaningful"] for v in ok))
    if meaningful:
        return None
    detail = run.get("verdict_note") or next((v["note"] for v in views if v["note"]), "")
    return INTERPRETER_NOTE + (f" ({detail})" if detail else "")


def _run_status(run: Mapping[str, Any]) -> str:
    """run.json's status, "interrupted" for a "running" run whose process is gone."""
    from .run.rundir import run_status  # the run directory's own reading of its owner

    return run_status(dict(run))


def run_report_data(run_dir: str | Path) -> dict[str, Any]:
    """Everything a run report shows, from the run directory (what report.json holds)."""
    run_dir = Path(run_dir)
    run = _read_json(run_dir / "run.json")
    if not isinstance(run, dict):
        raise FileNotFoundError(f"{run_dir / 'run.json'} is missing or not JSON: not a run dir?")
    views = _all_candidates(run_dir, run)
    environment = run.get("environment")
    if not isinstance(environment, Mapping) or not environment:
        environment = next((v["environment"] for v in views if v["environment"]), {})
    note = _timing_note(run, views)
    data: dict[str, Any] = {
        "kind": "run",
        "run_id": str(run.get("run_id") or run_dir.name),
        "task": str(run.get("task") or ""),
        "task_name": str(run.get("task_name") or ""),
        "task_hash": str(run.get("task_hash") or ""),
        "created": str(run.get("created") or ""),
        "finished": run.get("finished"),
        "status": _run_status(run),
        "stop_reason": run.get("stop_reason"),
        "stop_detail": run.get("stop_detail") or "",
        "models": run.get("models") or {},
        "config": run.get("config") or {},
        "environment": dict(environment),
        "timings_meaningful": note is None,
        "timing_note": note,
        "usage": run.get("usage") or {},
        "llm_unanswered": run.get("llm_unanswered") or {},
        "llm_switched_off": run.get("llm_switched_off") or [],
        "rounds": _round_rows(run_dir, views, run),
        "candidates": views,
        "best": _best_entry(run, views),
        "log": _events_summary(run_dir),
    }
    data["judged"] = judged_text(run, _other_shape(data))
    data["evaluator_errors"] = sum(v["fault"] == "evaluator" for v in views)
    data["verdict"] = _verdict(data) + _llm_verdict(data)
    return data


def _other_shape(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The second shape a verified candidate (the best first) was also checked at, if any."""
    best = data["best"] or {}
    views = sorted(
        (v for v in data["candidates"] if v["status"] == "ok"),
        key=lambda v: (v["round"], v["candidate"]) != (best.get("round"), best.get("candidate")),
    )
    for v in views:
        if len(v["shapes_checked"]) > 1:
            return v["shapes_checked"][1]
    return None


def _llm_verdict(data: Mapping[str, Any]) -> str:
    """A sentence when a configured model answered nothing, or an endpoint was switched off."""
    unanswered, off = data["llm_unanswered"], data["llm_switched_off"]
    if unanswered:
        order = ("planner", "coder", "critic")
        roles = sorted(unanswered, key=lambda r: order.index(r) if r in order else len(order))
        who = ", ".join(f"{role} ({data['models'].get(role, '?')})" for role in roles)
        return (
            f" The configured model answered no call for {who}: those steps ran on the rules "
            f"and the fusion codegen. Last error: {unanswered[roles[0]]}"
        )
    if off:
        return f" An LLM endpoint was switched off mid-run: {off[0]['error']}"
    return ""


def _environment_text(env: Mapping[str, Any]) -> str:
    if not env:
        return "unknown"
    device = env.get("gpu") or env.get("device") or ("cpu" if env.get("interpreter") else "?")
    parts = [str(device)]
    for key in ("torch", "triton", "cuda", "driver"):
        if isinstance(env.get(key), str) and env[key]:  # agents write cuda as a bool
            parts.append(f"{key} {env[key]}")
    if env.get("interpreter"):
        parts.append("Triton interpreter")
    return ", ".join(parts)


def _usage_text(usage: Mapping[str, Any]) -> str:
    if not usage:
        return "no LLM calls recorded"
    failed = usage.get("failed_calls", 0)
    return (
        f"{_num(usage.get('calls', 0))} calls answered ({_num(usage.get('cached_calls', 0))} "
        "cached)"
        + (f", {_num(failed)} failed ({_failures_text(usage)})" if failed else "")
        + (f", {_num(usage['refused_calls'])} not sent" if usage.get("refused_calls") else "")
        + f", {_num(usage.get('prompt_tokens', 0))} prompt + "
        f"{_num(usage.get('completion_tokens', 0))} completion tokens, "
        f"{_usd(usage.get('cost_usd'))}"
    )


def _failures_text(u: Mapping[str, Any]) -> str:
    failures = u.get("failures") or {}
    return ", ".join(f"{n} {kind}" for kind, n in sorted(failures.items())) or "–"


def _facts(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    models = ", ".join(f"{k}: {v}" for k, v in data["models"].items() if v) or "none (rules)"
    duration = data["log"]["duration_s"]
    stop = data["stop_reason"] or "–"
    if data["stop_detail"]:
        stop += f" ({data['stop_detail']})"
    return [
        ("Task", f"{data['task_name'] or data['task']} ({data['task']}, {data['task_hash'][:12]})"),
        ("Judged", data["judged"]),
        ("Run", f"{data['run_id']}, created {data['created'] or '?'}"),
        ("Status", f"{data['status'] or '?'}; stop reason: {stop}"),
        ("Models", models),
        ("Environment", _environment_text(data["environment"])),
        ("Usage", _usage_text(data["usage"])),
        ("Duration", f"{duration:.0f} s" if duration is not None else "–"),
    ]


_ROUND_HEADERS = (
    "Round",
    "Candidates",
    "Statuses",
    "Best vs eager",
    "Best vs torch.compile",
    "Roofline",
    "Best so far",
    "Plan",
)
_CAND_HEADERS = (
    "Round",
    "Cand",
    "Idea",
    "Status",
    "Rule",
    "vs eager",
    "vs torch.compile",
    "Peak memory (candidate / reference)",
    "Summary",
)
_AGENT_HEADERS = (
    "Agent",
    "Model",
    "Calls made",
    "Answered",
    "Failed (why)",
    "Not sent",
    "Retries",
    "Prompt tokens",
    "Completion tokens",
    "Cost",
    "Last error",
)


def _round_cells(r: Mapping[str, Any]) -> list[Any]:
    return [
        r["round"],
        r["candidates"],
        _statuses_text(r["statuses"]),
        _x(r["best_speedup_eager"]),
        _x(r["best_speedup_compiled"]),
        _pct(r["best_roofline_fraction"]),
        _x(r["best_so_far_eager"]),
        r["plan_summary"] or "–",
    ]


def _cand_cells(v: Mapping[str, Any], status: Any) -> list[Any]:
    return [
        v["round"],
        v["candidate"],
        v.get("idea") or v.get("origin") or "–",
        status,
        v["rule"] or "–",
        _x(v["speedup_eager"]),
        _x(v["speedup_compiled"]),
        _peaks(v.get("candidate_peak_bytes"), v.get("reference_peak_bytes")),
        v["summary"],
    ]


def _agent_rows(usage: Mapping[str, Any], models: Mapping[str, Any]) -> list[list[str]]:
    """One row per agent that called, or had a model and made no call."""
    per_agent = {k: v for k, v in (usage.get("per_agent") or {}).items() if isinstance(v, Mapping)}
    online = [role for role, model in models.items() if model and model != "offline"]
    rows = []
    for name in sorted({*per_agent, *online}):
        u = per_agent.get(name, {})
        answered, failed = u.get("calls", 0), u.get("failed_calls", 0)
        detail = [f"{_num(u['cached_calls'])} cached"] if u.get("cached_calls") else []
        if u.get("unusable"):
            detail.append(f"{_num(u['unusable'])} unusable")
        rows.append(
            [
                name,
                str(models.get(name) or "–"),
                _num(answered + failed),
                _num(answered) + (f" ({', '.join(detail)})" if detail else ""),
                f"{_num(failed)} ({_failures_text(u)})" if failed else "0",
                _num(u.get("refused_calls", 0)),
                _num(u.get("retries", 0)),
                _num(u.get("prompt_tokens", 0)),
                _num(u.get("completion_tokens", 0)),
                _usd(u.get("cost_usd")),
                (u.get("last_error") or "–")[:200] if failed or u.get("refused_calls") else "–",
            ]
        )
    return rows


def _run_markdown(data: Mapping[str, Any], plot: Path) -> str:
    parts = [
        f"# kernelwright run {data['run_id']}: {data['task_name'] or data['task']}",
        data["verdict"],
    ]
    if data["timing_note"]:
        parts.append(f"> **Note.** {data['timing_note']}")
    parts.append(_md_table(("", ""), _facts(data)))
    parts.append("## Rounds")
    parts.append(_md_table(_ROUND_HEADERS, [_round_cells(r) for r in data["rounds"]]))
    parts.append(f"![Best speedup per round]({plot.name})")
    parts.append("## Candidates")
    parts.append(
        _md_table(_CAND_HEADERS, [_cand_cells(v, v["status"]) for v in data["candidates"]])
    )
    agents = _agent_rows(data["usage"], data["models"])
    if agents:
        parts += ["## LLM calls per agent", _md_table(_AGENT_HEADERS, agents)]
    return "\n\n".join(parts) + "\n"


def _run_kernels(run_dir: Path, data: Mapping[str, Any]) -> list[_Html]:
    blocks = []
    best_py = run_dir / "best.py"
    if best_py.is_file():
        blocks.append(
            _kernel_block("best.py", best_py.read_text(errors="replace"), "ok", open_=True)
        )
    for v in data["candidates"]:
        for key in ("kernel", "tuned_kernel"):
            if v.get(key):
                source = (run_dir / v[key]).read_text(errors="replace")
                blocks.append(_kernel_block(v[key], source, v["status"]))
    return blocks


def _run_html(run_dir: Path, data: Mapping[str, Any], plot: Path) -> str:
    title = f"kernelwright run {data['run_id']}: {data['task_name'] or data['task']}"
    note = f'<p class="note">{_h(data["timing_note"])}</p>' if data["timing_note"] else ""
    cand_rows = [_cand_cells(v, _badge(v["status"])) for v in data["candidates"]]
    agents = _agent_rows(data["usage"], data["models"])
    agent_html = (
        f"<h2>LLM calls per agent</h2>{_html_table(_AGENT_HEADERS, agents)}" if agents else ""
    )
    kernels = "".join(_run_kernels(run_dir, data)) or "<p>No kernel files in this run.</p>"
    body = (
        f"<h1>{_h(title)}</h1>"
        f'<p class="verdict">{_h(data["verdict"])}</p>{note}'
        f"<h2>Best speedup per round</h2>{_img(plot, 'Best speedup per round')}"
        f"<h2>Run</h2>{_html_table(('', ''), _facts(data), 'facts')}"
        f"<h2>Rounds</h2>"
        f"{_html_table(_ROUND_HEADERS, [_round_cells(r) for r in data['rounds']], 'rounds')}"
        f"<h2>Candidates</h2>{_html_table(_CAND_HEADERS, cand_rows, 'candidates')}"
        f"{agent_html}<h2>Kernels</h2>{kernels}"
    )
    return _page(title, body)


def write_run_report(run_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.json, speedup_per_round.png and report.html into the run dir."""
    run_dir = Path(run_dir)
    data = run_report_data(run_dir)
    plot = plot_rounds(data["rounds"], run_dir / "speedup_per_round.png")
    md = run_dir / "report.md"
    md.write_text(_run_markdown(data, plot))
    page = run_dir / "report.html"
    page.write_text(_run_html(run_dir, data, plot))
    return {
        "markdown": md,
        "json": _write_json(run_dir / "report.json", data),
        "plot": plot,
        "html": page,
    }


# -- suite reports --------------------------------------------------------------------------------


def suite_row(task: str, result: EvalResult | None) -> dict[str, Any]:
    """A suite row from a task's final verdict (None: the task was never evaluated)."""
    if result is None:
        return {"task": task, "status": "pending", "correct": False, "rule": None}
    return {
        "task": task,
        "status": result.status,
        "rule": result.rule,
        "correct": result.ok,
        "speedup_eager": _finite(result.speedup_eager),
        "speedup_compiled": _finite(result.speedup_compiled),
        "roofline_fraction": _finite(result.roofline.fraction) if result.roofline else None,
        "limiter": result.roofline.limiter if result.roofline else None,
        **_memory_fields(result),
    }


def _memory_fields(result: EvalResult) -> dict[str, Any]:
    """Peak device memory of the candidate and of the reference (bytes; None on CPU)."""
    m = result.memory
    return {
        "candidate_peak_bytes": m.candidate_peak_bytes if m else None,
        "reference_peak_bytes": m.reference_peak_bytes if m else None,
    }


def _normal_row(row: Mapping[str, Any]) -> dict[str, Any]:
    correct = bool(row.get("correct", row.get("status") == "ok"))
    return {
        "task": str(row.get("task", "?")),
        "status": str(row.get("status") or ("ok" if correct else "incorrect")),
        "rule": row.get("rule"),
        "correct": correct,
        "speedup_eager": _finite(row.get("speedup_eager")),
        "speedup_compiled": _finite(row.get("speedup_compiled")),
        "roofline_fraction": _finite(row.get("roofline_fraction")),
        "limiter": row.get("limiter"),  # what bounds the roofline: "memory" or "compute"
        "tuned": row.get("tuned"),  # the `# tune:` sweep changed the kernel's constants
        "note": row.get("note"),  # why there is no candidate, or what its verdict said
        "kernel": row.get("kernel"),
        # Verdicts that were kernelwright's fault, not a candidate's (EvalResult.fault).
        "evaluator_errors": int(row.get("evaluator_errors") or 0),
        "candidate_peak_bytes": row.get("candidate_peak_bytes"),
        "reference_peak_bytes": row.get("reference_peak_bytes"),
    }


def _p_label(p: float) -> str:
    return f"{p:g}"


def _fast_p(rows: Sequence[Mapping[str, Any]], key: str, p: float) -> float | None:
    if not rows:
        return None
    if p == 0:  # every measured speedup is > 0, and an unmeasured correct task still counts
        return sum(r["correct"] for r in rows) / len(rows)
    hits = sum(r["correct"] and r[key] is not None and r[key] > p for r in rows)
    return hits / len(rows)


def _geomean(values: Iterable[float | None]) -> float | None:
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def suite_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """KernelBench metrics over per-task rows (task, correct, speedup_eager, speedup_compiled).

    fast_p: the fraction of *all* tasks that are correct and more than p times faster than the
    baseline (KernelBench's definition, strict >); geometric means over correct, timed tasks.
    """
    rows = [_normal_row(r) for r in rows]
    levels: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if "/" in r["task"]:  # KernelBench's layout: "level1/01_relu"
            levels.setdefault(r["task"].split("/", 1)[0], []).append(r)
    whole = _level_summary(rows)  # tasks, correct and geometric means, as for each level
    return {
        "levels": {name: _level_summary(group) for name, group in sorted(levels.items())},
        **whole,
        "correctness_rate": whole["correct"] / len(rows) if rows else None,
        "fast_p": {
            baseline: {_p_label(p): _fast_p(rows, key, p) for p in FAST_P_THRESHOLDS}
            for baseline, key in (("eager", "speedup_eager"), ("compiled", "speedup_compiled"))
        },
        "timed": sum(r["correct"] and r["speedup_eager"] is not None for r in rows),
        "evaluator_errors": sum(r["evaluator_errors"] for r in rows),
        "tasks_with_evaluator_errors": sum(r["evaluator_errors"] > 0 for r in rows),
        "task_errors": sum(r["status"] == "task-error" for r in rows),
    }


def _level_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts and geometric means of a set of rows: the whole suite, or one level (KernelBench
    reports its levels apart)."""
    correct = [r for r in rows if r["correct"]]
    return {
        "tasks": len(rows),
        "correct": len(correct),
        "geomean_speedup_eager": _geomean(r["speedup_eager"] for r in correct),
        "geomean_speedup_compiled": _geomean(r["speedup_compiled"] for r in correct),
    }


def _level_text(level: Mapping[str, Any]) -> str:
    """'44 tasks, 40 correct, geomean 1.38x vs eager, 1.05x vs torch.compile'."""
    tasks = f"{level['tasks']} task{'s' * (level['tasks'] != 1)}"
    return (
        f"{tasks}, {level['correct']} correct, geomean "
        f"{_x(level['geomean_speedup_eager'])} vs eager, "
        f"{_x(level['geomean_speedup_compiled'])} vs torch.compile"
    )


def level_line(name: str, level: Mapping[str, Any]) -> str:
    """'level1: 44 tasks, 40 correct, ...': one level's line in the suite's summary."""
    return f"{name}: {_level_text(level)}"


def _summary_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    rows = [
        ["Tasks", str(summary["tasks"])],
        ["Correct", f"{summary['correct']} ({_pct(summary['correctness_rate'])})"],
    ]
    for baseline, label in (("eager", "eager"), ("compiled", "torch.compile")):
        fast = summary["fast_p"][baseline]
        rows.append(
            [f"fast_p vs {label}", ", ".join(f"fast_{p}: {_pct(v)}" for p, v in fast.items())]
        )
    rows.append(["Geomean speedup vs eager", _x(summary["geomean_speedup_eager"])])
    rows.append(["Geomean speedup vs torch.compile", _x(summary["geomean_speedup_compiled"])])
    rows.append(["Correct tasks with timings", str(summary["timed"])])
    rows.append(
        [
            "Evaluator errors (kernelwright's, not the candidates')",
            f"{summary['evaluator_errors']} in {summary['tasks_with_evaluator_errors']} task(s)",
        ]
    )
    rows.append(["Task errors (the reference itself fails)", str(summary["task_errors"])])
    for name, level in summary.get("levels", {}).items():
        rows.append([f"By level: {name}", _level_text(level)])
    return rows


_TASK_HEADERS = (
    "Task",
    "Status",
    "Correct",
    "vs eager",
    "vs torch.compile",
    "Roofline",
    "Bound by",
    "Tuned",
    "Peak memory (candidate / reference)",
    "Evaluator errors",
    "Note",
)


def _task_cells(r: Mapping[str, Any], status: Any) -> list[Any]:
    return [
        r["task"],
        status,
        "yes" if r["correct"] else "no",
        _x(r["speedup_eager"]),
        _x(r["speedup_compiled"]),
        _pct(r["roofline_fraction"]),
        r["limiter"] or "–",
        "–" if r["tuned"] is None else ("yes" if r["tuned"] else "no"),
        _peaks(r.get("candidate_peak_bytes"), r.get("reference_peak_bytes")),
        r["evaluator_errors"],
        _short_note(r["note"]),
    ]


def _peaks(candidate: Any, reference: Any) -> str:
    """'1.20 / 0.85 GiB', or '–' where device memory was not measured (the interpreter)."""
    if candidate is None and reference is None:
        return "–"
    gib = [("?" if v is None else f"{v / 2**30:.2f}") for v in (candidate, reference)]
    return f"{gib[0]} / {gib[1]} GiB"


def _short_note(note: Any) -> str:
    """The note's first line, at most 120 characters: a table cell, not the whole message."""
    text = str(note or "").strip().split("\n", 1)[0]
    return text if len(text) <= 120 else text[:117] + "..."


def write_suite_report(
    rows: Iterable[Mapping[str, Any]], out_dir: str | Path, title: str = "kernelwright suite"
) -> dict[str, Path]:
    """Write suite.md, suite.json, suite_speedups.png and suite.html into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = sorted((_normal_row(r) for r in rows), key=lambda r: r["task"])
    summary = suite_summary(rows)
    plot = plot_suite(rows, out / "suite_speedups.png")
    md = out / "suite.md"
    md.write_text(
        f"# {title}\n\n{_md_table(('Metric', 'Value'), _summary_rows(summary))}\n\n"
        f"![Speedup per task]({plot.name})\n\n## Tasks\n\n"
        f"{_md_table(_TASK_HEADERS, [_task_cells(r, r['status']) for r in rows])}\n"
    )
    kernels = "".join(
        _kernel_block(r["task"], str(r["kernel"]), r["status"]) for r in rows if r["kernel"]
    )
    task_rows = [_task_cells(r, _badge(r["status"])) for r in rows]
    body = (
        f"<h1>{_h(title)}</h1>"
        f"<h2>Summary</h2>{_html_table(('Metric', 'Value'), _summary_rows(summary), 'summary')}"
        f"<h2>Speedup per task</h2>{_img(plot, 'Speedup per task')}"
        f"<h2>Tasks</h2>"
        f"{_html_table(_TASK_HEADERS, task_rows, 'tasks')}"
        + (f"<h2>Kernels</h2>{kernels}" if kernels else "")
    )
    page = out / "suite.html"
    page.write_text(_page(title, body))
    json_rows = [{k: v for k, v in r.items() if k != "kernel"} for r in rows]
    return {
        "markdown": md,
        "json": _write_json(out / "suite.json", {"summary": summary, "tasks": json_rows}),
        "plot": plot,
        "html": page,
    }


# -- nightly reports ------------------------------------------------------------------------------


def _as_mapping(row: Any) -> Mapping[str, Any]:
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    return row


def _series_name(h: Mapping[str, Any]) -> str:
    name = h.get("task_name") or str(h.get("task_hash", "?"))[:12]
    variant = h.get("variant") or "fp32"
    return name if variant == "fp32" else f"{name} ({variant})"


def _series_key(h: Mapping[str, Any]) -> tuple[str, str, str]:
    gpu = str(h.get("env_key", "")).split("|", 1)[0]
    return (str(h.get("task_hash", "")), str(h.get("variant") or "fp32"), gpu)


def _slowdown(latest: Mapping[str, Any], previous: Mapping[str, Any]) -> float | None:
    """How much slower the kernel got (0.12 = 12% slower): its own median time when both nights
    have one (eager moving with a torch upgrade is not the kernel's doing), else speedups."""
    now_ms, then_ms = _finite(latest.get("candidate_ms")), _finite(previous.get("candidate_ms"))
    if now_ms and then_ms:
        return now_ms / then_ms - 1.0
    now_x, then_x = _finite(latest.get("speedup_eager")), _finite(previous.get("speedup_eager"))
    if now_x and then_x:
        return then_x / now_x - 1.0
    return None


def _measured(row: Mapping[str, Any]) -> bool:
    """A history row that says something about the kernel: not an evaluator error."""
    return fault_of(str(row["status"]), row.get("rule")) != "evaluator"


def nightly_changes(
    history: Iterable[Any], slowdown: float = NIGHTLY_SLOWDOWN
) -> list[dict[str, Any]]:
    """Per task (and variant, and GPU): the latest nightly run against the one before it, with
    a verdict. The one before is the latest earlier run that measured the kernel, whatever its
    date (a second run on one night compares with the first); an evaluator error measured
    nothing, so it is never the one compared with.

    A regression is a kernel that is no longer ok (incorrect, failing to compile, crashing...) or
    that got slower by more than `slowdown`. An evaluator error (kernelwright's fault) and a task
    error (the reference itself fails) are not the kernel's: they are flagged apart. The nightly
    command exits non-zero on any of the three.
    """
    series: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in map(_as_mapping, history):
        series.setdefault(_series_key(row), []).append(row)
    changes = []
    for rows in series.values():
        rows = sorted(rows, key=lambda h: (h["night"], str(h.get("recorded") or "")))
        latest = rows[-1]
        previous = next((h for h in reversed(rows[:-1]) if _measured(h)), None)
        change = _slowdown(latest, previous) if previous and previous["status"] == "ok" else None
        fault = fault_of(latest["status"], latest.get("rule")) if latest["status"] != "ok" else ""
        rule = f" [{latest['rule']}]" if latest.get("rule") else ""
        reason = ""
        if fault == "evaluator":
            reason = f"evaluator error{rule}: kernelwright failed, not the kernel"
        elif fault == "task":
            reason = f"task error{rule}: the reference itself fails"
        elif latest["status"] != "ok":
            reason = f"now {latest['status']}{rule}"
        elif change is not None and change > slowdown:
            when = (
                f"the earlier run of {previous['night']}"  # type: ignore[index]
                if previous and previous["night"] == latest["night"]
                else previous["night"]  # type: ignore[index]
            )
            reason = f"{change:.0%} slower than {when}"
        changes.append(
            {
                "task": _series_name(latest),
                "task_hash": latest.get("task_hash"),
                "variant": latest.get("variant") or "fp32",
                "env_key": latest.get("env_key"),
                "gpu": _series_key(latest)[2],
                "night": latest["night"],
                "status": latest["status"],
                "rule": latest.get("rule"),
                "speedup_eager": _finite(latest.get("speedup_eager")),
                "candidate_ms": _finite(latest.get("candidate_ms")),
                "previous_night": previous["night"] if previous else None,
                "previous_recorded": previous.get("recorded") if previous else None,
                "previous_status": previous["status"] if previous else None,
                "previous_speedup_eager": _finite(previous.get("speedup_eager"))
                if previous
                else None,
                "previous_candidate_ms": _finite(previous.get("candidate_ms"))
                if previous
                else None,
                "slowdown": change,
                "regression": bool(reason) and fault not in ("evaluator", "task"),
                "evaluator_error": fault == "evaluator",
                "task_error": fault == "task",
                "reason": reason,
            }
        )
    return sorted(changes, key=lambda c: (not c["reason"], c["task"]))


_NIGHT_HEADERS = (
    "Task",
    "GPU",
    "Night",
    "Status",
    "vs eager",
    "Kernel time",
    "Previous",
    "Previous vs eager",
    "Change",
    "Verdict",
)


def _previous_text(c: Mapping[str, Any]) -> str:
    """The run compared with: its night, and its time when it ran the same night."""
    if not c["previous_night"]:
        return "–"
    if c["previous_night"] == c["night"] and c.get("previous_recorded"):
        return f"{c['previous_night']} (earlier run, {str(c['previous_recorded'])[11:16]} UTC)"
    return str(c["previous_night"])


def _night_cells(c: Mapping[str, Any], html_: bool) -> list[Any]:
    verdict: Any = c["reason"] or "ok"
    if html_ and c["reason"]:
        verdict = _Html(f'<span class="regression">{_h(c["reason"])}</span>')
    change = c["slowdown"]
    return [
        c["task"],
        c["gpu"],
        c["night"],
        _badge(c["status"]) if html_ else c["status"],
        _x(c["speedup_eager"]),
        _ms(c["candidate_ms"]),
        _previous_text(c),
        _x(c["previous_speedup_eager"]),
        f"{change:+.1%} time" if change is not None else "–",
        verdict,
    ]


def write_nightly_report(
    history: Iterable[Any],
    out_dir: str | Path,
    slowdown: float = NIGHTLY_SLOWDOWN,
    title: str = "kernelwright nightly",
) -> dict[str, Path]:
    """Write nightly.md, nightly.json, nightly_trend.png and nightly.html into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [dict(_as_mapping(h)) for h in history]
    changes = nightly_changes(rows, slowdown)
    regressions = [c for c in changes if c["regression"]]
    evaluator_errors = [c for c in changes if c["evaluator_error"]]
    task_errors = [c for c in changes if c["task_error"]]
    plot = plot_nightly(rows, out / "nightly_trend.png")
    latest = max((c["night"] for c in changes), default="–")
    headline = (
        f"{len(regressions)} regression{'s' * (len(regressions) != 1)} among {len(changes)} "
        f"kernel{'s' * (len(changes) != 1)}, night {latest} (a regression: no longer ok, or "
        f"more than {slowdown:.0%} slower than the run before)."
    )
    if evaluator_errors:
        headline += (
            f" {len(evaluator_errors)} evaluator error(s): kernelwright failed, so those kernels "
            "were not measured (not counted as regressions)."
        )
    if task_errors:
        headline += f" {len(task_errors)} task error(s): the reference itself fails."
    md = out / "nightly.md"
    md.write_text(
        f"# {title}\n\n{headline}\n\n"
        f"{_md_table(_NIGHT_HEADERS, [_night_cells(c, False) for c in changes])}\n\n"
        f"![Night over night]({plot.name})\n"
    )
    body = (
        f'<h1>{_h(title)}</h1><p class="verdict">{_h(headline)}</p>'
        f"<h2>Trend</h2>{_img(plot, 'Night over night')}"
        f"<h2>Latest night</h2>"
        f"{_html_table(_NIGHT_HEADERS, [_night_cells(c, True) for c in changes], 'nightly')}"
    )
    page = out / "nightly.html"
    page.write_text(_page(title, body))
    return {
        "markdown": md,
        "json": _write_json(
            out / "nightly.json",
            {
                "regressions": len(regressions),
                "evaluator_errors": len(evaluator_errors),
                "task_errors": len(task_errors),
                "changes": changes,
                "history": rows,
            },
        ),
        "plot": plot,
        "html": page,
    }
