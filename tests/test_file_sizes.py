"""A package file stays under 700 lines, or says why in its first lines: a line of its module
docstring that starts "Over 700 lines because" and goes on to give the reason (ARCHITECTURE.md's
invariant). Tests, benchmarks and the prompts' worked examples are no rooms and are not held to
it."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from test_architecture_map import python_files

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 700
MARKER = "Over 700 lines because"
NOT_ROOMS = ("tests/", "benchmarks/", "shared/", "prompts/")


def package_modules(root: Path = ROOT) -> list[Path]:
    """The package's .py files (relative), as git sees them, rooms only."""
    files = [p.relative_to(root) for p in python_files(root)]
    return [p for p in files if not p.as_posix().startswith(NOT_ROOMS)]


def reason(text: str) -> str | None:
    """The reason a module's docstring gives for its length: the text of its line that starts
    with MARKER, after the marker (None when there is no such line, or it gives no reason)."""
    doc = ast.get_docstring(ast.parse(text)) or ""
    for line in doc.splitlines():
        if line.startswith(MARKER):
            said = line[len(MARKER) :].strip(" :,.")
            return said or None
    return None


def unexplained(root: Path = ROOT) -> list[str]:
    """'path (N lines)' of each package module over LIMIT lines with no reason at its top."""
    found = []
    for rel in package_modules(root):
        text = (root / rel).read_text()
        lines = len(text.splitlines())
        if lines > LIMIT and reason(text) is None:
            found.append(f"{rel.as_posix()} ({lines} lines)")
    return found


def test_every_file_over_700_lines_says_why_at_its_top() -> None:
    missing = unexplained()
    assert not missing, (
        f"over {LIMIT} lines with no line starting {MARKER!r} in the module docstring: "
        + ", ".join(missing)
    )


def test_the_check_reads_the_marker_only_at_a_line_start_of_the_docstring(tmp_path) -> None:
    long = "x = 1\n" * LIMIT
    files = {
        "said.py": f'"""A table.\n\n{MARKER} it is a table of fifty entries.\n"""\n{long}',
        "silent.py": f'"""A module."""\n{long}',
        "mid_line.py": f'"""A module. {MARKER} it is long.\n"""\n{long}',
        "comment.py": f'"""A module."""\n# {MARKER} a comment is not its first lines\n{long}',
        "empty.py": f'"""A module.\n\n{MARKER}.\n"""\n{long}',
        "short.py": '"""Short."""\nx = 1\n',
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert unexplained(tmp_path) == [
        f"{name} ({LIMIT + n} lines)"
        for name, n in (("comment.py", 2), ("empty.py", 4), ("mid_line.py", 2), ("silent.py", 1))
    ]
