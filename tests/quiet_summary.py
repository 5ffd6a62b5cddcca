"""A pytest plugin: the skips of a run summed up by reason in a few lines, instead of `-ra`'s line
per skipped test (about fifty on a CPU machine, where every GPU test skips). `pytest -rs` still
lists each one."""

from __future__ import annotations

from collections import Counter

# Distinct reasons shown; the rest are counted in one line (the fusion benchmark test skips each
# task the codegen has no candidate for, each with its own reason).
MAX_REASONS = 4


def skip_reason(report) -> str:
    """A skipped test's reason, without pytest's "Skipped: " prefix."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def summary_lines(reasons: list[str]) -> list[str]:
    """'12 skipped: needs a CUDA GPU (...)' per reason, the most frequent first."""
    counts = Counter(reasons).most_common()
    lines = [f"{n} skipped: {reason}" for reason, n in counts[:MAX_REASONS]]
    rest = counts[MAX_REASONS:]
    if rest:
        lines.append(
            f"{sum(n for _, n in rest)} skipped for {len(rest)} other reasons "
            "(`pytest -rs` lists each skip)"
        )
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if "s" in (config.option.reportchars or "") or "a" in (config.option.reportchars or ""):
        return  # asked for the full list (-rs, -ra): pytest prints it
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        for line in summary_lines([skip_reason(r) for r in skipped]):
            terminalreporter.write_line(line)
