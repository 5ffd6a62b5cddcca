"""Each room says in its first lines what it may import, and imports nothing else.

A room here is a package: a folder with an `__init__.py`. Its docstring holds one paragraph that
starts with "May import:" and names, in backticks, what its modules may import: a folder
(`run/`, `crossing/`) or a file (`decisions.py`, `results.py`); "May import: nothing" names none.
Other words in backticks (`ray`) are prose, and what the paragraph says from its first "Never"
on (the rooms it must not import) is for the reader: neither is read as a room.
A name is looked up beside the package, then in each folder above it up to the repository's
root (a folder inside the package first: a subpackage): `crossing/` in sandbox/judge/ is
sandbox/crossing/, `errors.py` in agents/llm/ is the root's errors.py (its own errors.py needs no
declaration), `judge/` in sandbox/ is sandbox/judge/. A folder covers every file under it, its
subpackages too.

The declaration governs the package's own modules (its `__init__.py` and the files beside it);
its subpackages declare their own. A module may always import the modules of its own package.
Every import counts, read from the source with `ast` (nothing is imported): at the top, lazy
inside a function, relative or absolute, and those under `if TYPE_CHECKING:` too, on purpose: a
type names another room as much as a call does. `from x import y` counts the module y where y
is one, else x. A file at the root (cli.py, graph.py, store.py, ...) is a room of one module:
ARCHITECTURE.md's floors say what it may import.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from test_architecture_map import python_files

ROOT = Path(__file__).resolve().parent.parent
NOT_ROOMS = ("tests/", "benchmarks/", "shared/")


def tracked_files(root: Path = ROOT) -> list[Path]:
    """The tree's .py files (relative) as git sees them, rooms only (no tests, benchmarks or a
    checkout's shared/ copy)."""
    files = [p.relative_to(root) for p in python_files(root)]
    return [p for p in files if not p.as_posix().startswith(NOT_ROOMS)]


def packages(root: Path = ROOT) -> list[Path]:
    """Every package of the tree but the root itself."""
    return sorted(
        p.parent for p in tracked_files(root) if p.name == "__init__.py" and p.parent != Path(".")
    )


def declared(package: Path, root: Path = ROOT) -> list[str] | None:
    """The rooms (relative, posix; a folder ends with /) that `package` says it may import, or
    None when its __init__.py has no "May import:" paragraph."""
    doc = ast.get_docstring(ast.parse((root / package / "__init__.py").read_text())) or ""
    said = [p.strip() for p in re.split(r"\n\s*\n", doc) if p.strip().startswith("May import:")]
    if len(said) != 1:
        return None
    allowed = said[0].split("Never", 1)[0]  # what it names after "Never" is for the reader
    names = re.findall(r"`([\w./]+(?:/|\.py))`", allowed)
    if not names and not said[0].startswith("May import: nothing"):
        return None
    return [resolve(package, name, root) for name in names]


def resolve(package: Path, name: str, root: Path = ROOT) -> str:
    """The room `name` stands for in `package`'s declaration: a folder inside it (a subpackage),
    else beside it, else above; a file beside it, else above."""
    is_folder = name.endswith("/")
    folder = package if is_folder else package.parent  # its own files need no declaration
    while True:
        where = folder / name.rstrip("/")
        if (root / where).is_dir() if is_folder else (root / where).is_file():
            return where.as_posix() + ("/" if is_folder else "")
        if folder == Path("."):
            raise AssertionError(f"{package}/__init__.py declares `{name}`, which is no room")
        folder = folder.parent


def _file_of(module: list[str], root: Path) -> str | None:
    """The file (relative, posix) of the kernelwright module with these parts below the root."""
    rel = Path(*module) if module else Path(".")
    for file in ([rel.with_suffix(".py")] if module else []) + [rel / "__init__.py"]:
        if (root / file).is_file():
            return file.as_posix()
    return None


def imported_files(path: Path, root: Path = ROOT) -> set[str]:
    """The kernelwright files module `path` (relative) imports, relative and posix."""
    package = list(path.parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse((root / path).read_text(), str(path))):
        targets: list[tuple[list[str], list[str]]] = []
        if isinstance(node, ast.Import):
            targets = [
                (a.name.split(".")[1:], [])
                for a in node.names
                if a.name.split(".")[0] == "kernelwright"
            ]
        elif isinstance(node, ast.ImportFrom) and node.level:
            if node.level - 1 > len(package):
                raise AssertionError(f"{path}:{node.lineno}: a relative import above the root")
            base = package[: len(package) - (node.level - 1)]
            module = [*base, *(node.module.split(".") if node.module else [])]
            targets = [(module, [a.name for a in node.names])]
        elif (
            isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kernelwright"
        ):
            targets = [((node.module or "").split(".")[1:], [a.name for a in node.names])]
        for module, names in targets:
            modules = [_file_of([*module, n], root) for n in names]
            found.update(f for f in modules if f)
            if not names or not all(modules):
                file = _file_of(module, root)
                if file is not None:
                    found.add(file)
    return found


def _absolute(module: str | None) -> bool:
    return (module or "").split(".")[0] == "kernelwright"


def _covers(room: str, file: str) -> bool:
    return file.startswith(room) if room.endswith("/") else file == room


def undeclared(root: Path = ROOT) -> dict[str, list[str]]:
    """{module: the files it imports that its package does not declare}, over every package."""
    files = tracked_files(root)
    out: dict[str, list[str]] = {}
    for package in packages(root):
        rooms = declared(package, root) or []
        for module in (f for f in files if f.parent == package):
            bad = sorted(
                f
                for f in imported_files(module, root)
                if Path(f).parent != package and not any(_covers(r, f) for r in rooms)
            )
            if bad:
                out[module.as_posix()] = bad
    return out


def test_every_package_says_what_it_may_import() -> None:
    silent = [f"{p}/__init__.py" for p in packages() if declared(p) is None]
    assert not silent, "no 'May import:' paragraph with its rooms in backticks: " + ", ".join(
        silent
    )


def test_no_module_imports_a_room_its_package_did_not_declare() -> None:
    found = undeclared()
    assert not found, "imports that their package's __init__.py does not declare:\n" + "\n".join(
        f"  {module}: {', '.join(files)}" for module, files in sorted(found.items())
    )


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_the_check_finds_each_kind_of_undeclared_import(tmp_path) -> None:
    root = _tree(
        tmp_path,
        {
            "store.py": "",
            "decisions.py": "",
            "low/__init__.py": '"""Low.\n\nMay import: nothing.\n"""\n',
            "low/inner/__init__.py": '"""Inner.\n\nMay import: `decisions.py`.\n"""\n',
            "low/inner/a.py": "from ... import decisions\nfrom ...store import x\n",
            "high/__init__.py": '"""High.\n\nMay import: `low/`, `decisions.py`.\n"""\n',
            "high/ok.py": (
                "from ..low.inner import a\nfrom . import lazy\nimport kernelwright.decisions\n"
            ),
            "high/lazy.py": "def f():\n    from kernelwright.store import Store\n",
            "high/typed.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ..store import Store\n"
            ),
            "silent/__init__.py": '"""Says nothing of its imports."""\n',
        },
    )
    assert declared(Path("low"), root) == []
    assert declared(Path("low/inner"), root) == ["decisions.py"]
    assert declared(Path("silent"), root) is None
    assert undeclared(root) == {
        "low/inner/a.py": ["store.py"],  # relative, two levels up
        "high/lazy.py": ["store.py"],  # lazy, absolute
        "high/typed.py": ["store.py"],  # under TYPE_CHECKING
    }
