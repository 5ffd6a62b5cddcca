"""ARCHITECTURE.md is the house: every package file is named on the map.

A file is named when one block of the map (a table row, a bullet, a paragraph) holds its whole
path (`sandbox/judge/pool.py`), or holds its folder (`sandbox/judge/`) and its name (`pool.py`);
a file at the root needs only its name (`cli.py`). Tests and benchmarks are no rooms. An
`__init__.py` that defines nothing (a package's face: a docstring and the names it hands on) need
not be named; one that defines a function or a class must be.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "ARCHITECTURE.md"
NOT_ROOMS = ("tests", "benchmarks")


def python_files(root: Path) -> list[Path]:
    """The tree's .py files, without what git ignores (a checkout's copy of the KernelBench
    tasks under shared/, build outputs); every file where git cannot say."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return sorted(root.rglob("*.py"))
    return sorted(root / name for name in listed if (root / name).exists())


def package_files(root: Path = ROOT) -> list[Path]:
    found = []
    for path in python_files(root):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_ROOMS or any(p.startswith(".") for p in rel.parts):
            continue
        if "__pycache__" in rel.parts:
            continue
        if path.name == "__init__.py" and not _defines(path):
            continue
        found.append(rel)
    return found


def _defines(path: Path) -> bool:
    tree = ast.parse(path.read_text(), str(path))
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body
    )


def blocks(text: str) -> list[str]:
    """The map cut into table rows, bullets and paragraphs."""
    out: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        starts = line.startswith(("|", "- ", "#")) or re.match(r"\d+\. ", line)
        if not line.strip() or starts:
            if current:
                out.append("\n".join(current))
            current = [line] if line.strip() else []
        else:
            current.append(line)
    if current:
        out.append("\n".join(current))
    return out


def _names(block: str, word: str) -> bool:
    return re.search(rf"(?<![\w/.]){re.escape(word)}(?![\w])", block) is not None


def unnamed(text: str, files: list[Path]) -> list[str]:
    parts = blocks(text)
    missing = []
    for rel in files:
        whole = rel.as_posix()
        folder = rel.parent.as_posix() + "/"
        if len(rel.parts) == 1:
            named = any(f"`{rel.name}`" in b for b in parts)
        else:
            named = any(whole in b or (f"`{folder}" in b and _names(b, rel.name)) for b in parts)
        if not named:
            missing.append(whole)
    return missing


def test_every_package_file_is_on_the_map():
    missing = unnamed(MAP.read_text(), package_files())
    assert not missing, "ARCHITECTURE.md names no room for: " + ", ".join(missing)


def test_the_check_finds_a_file_left_off():
    text = "| 1 | `sandbox/judge/` | `pool.py` starts judges |\n\n- `cli.py` parses\n"
    files = [Path("cli.py"), Path("sandbox/judge/pool.py"), Path("sandbox/judge/worker.py")]
    assert unnamed(text, files) == ["sandbox/judge/worker.py"]
    # a name in another folder's row does not count
    assert unnamed("| `run/` | `pool.py` |\n", [Path("sandbox/judge/pool.py")]) == [
        "sandbox/judge/pool.py"
    ]
