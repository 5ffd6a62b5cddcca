"""Appending a row to a table in benchmarks/RESULTS.md; shared by the benchmark scripts."""

from __future__ import annotations

from pathlib import Path


def add_row(path: Path, title: str, preamble: str, columns: list[str], cells: list[str]) -> None:
    """Add `cells` as the last row of the table under `## title`, creating the section if new."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    heading = f"## {title}"
    row = "| " + " | ".join(cells) + " |"
    lines = text.rstrip("\n").split("\n")
    if heading not in lines:
        lines += ["", heading, "", preamble.strip(), ""]
        lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines.append(row)
    else:
        start = lines.index(heading)
        end = start + 1
        while end < len(lines) and not lines[end].startswith("## "):
            end += 1
        last_row = max(i for i in range(start, end) if lines[i].startswith("|"))
        lines.insert(last_row + 1, row)
    path.write_text("\n".join(lines) + "\n")
