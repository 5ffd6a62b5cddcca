"""The wall shows in the folders: the candidate's side of sandbox/ imports nothing of the judge's.

Read from the source with `ast` (nothing is imported): every module under sandbox/candidate/,
and every kernelwright module it reaches through its imports (direct, lazy inside a function,
or through another package), must stay out of sandbox/judge/. The same for sandbox/crossing/
(used by both sides) and for sandbox/static/ and sandbox/task/, which the candidate's process
imports too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SANDBOX = ROOT / "sandbox"
JUDGE = "kernelwright.sandbox.judge"
CANDIDATE = "kernelwright.sandbox.candidate"


def _module_name(path: Path) -> str:
    parts = ["kernelwright", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_of(module: str) -> Path | None:
    if not module.startswith("kernelwright"):
        return None
    rel = Path(*module.split(".")[1:])
    for candidate in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(path: Path) -> set[str]:
    """The kernelwright modules a file imports, lazily or not (`from .x import y` counts x, and
    y too where y is a module of x)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kernelwright"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if not target.startswith("kernelwright"):
                continue
            found.add(target)
            for alias in node.names:
                if _file_of(f"{target}.{alias.name}") is not None:
                    found.add(f"{target}.{alias.name}")
    return found


def reached(start: Path) -> dict[str, list[str]]:
    """Every kernelwright module `start` reaches, each with one chain of imports that gets there.
    A module's parent packages count too (importing a.b.c runs a/__init__ and a/b/__init__), but
    the sandbox's own face (sandbox/__init__.py, which hands on EvalPool) and kernelwright's are
    not followed: they are the public entry, not what the file needs."""
    faces = {"kernelwright", "kernelwright.sandbox"}
    chains = {_module_name(start): [_module_name(start)]}
    todo = [start]
    while todo:
        path = todo.pop()
        here = _module_name(path)
        for module in sorted(imported_modules(path)):
            parts = module.split(".")
            for k in range(2, len(parts) + 1):
                name = ".".join(parts[:k])
                if name in chains or name in faces:
                    continue
                file = _file_of(name)
                if file is None:
                    continue
                chains[name] = [*chains[here], name]
                todo.append(file)
    return chains


def _files(package: str) -> list[Path]:
    return sorted((SANDBOX / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["candidate", "crossing", "static", "task"])
def test_no_side_but_the_judge_reaches_the_judge(package):
    files = _files(package)
    assert files, f"sandbox/{package}/ holds no module"
    bad = []
    for path in files:
        for name, chain in reached(path).items():
            if name == JUDGE or name.startswith(JUDGE + "."):
                bad.append(" -> ".join(chain))
    assert not bad, "a module outside the judge imports the judge's:\n" + "\n".join(bad)


@pytest.mark.parametrize("package", ["crossing", "static", "task"])
def test_what_both_sides_use_imports_no_candidate_code(package):
    bad = []
    for path in _files(package):
        for name, chain in reached(path).items():
            if name == CANDIDATE or name.startswith(CANDIDATE + "."):
                bad.append(" -> ".join(chain))
    assert not bad, "a module both sides use imports the candidate's:\n" + "\n".join(bad)


def test_the_judge_imports_no_candidate_code():
    """The judge starts the candidate's side by its module name (`-m ...zygote`), never imports
    it."""
    bad = []
    for path in _files("judge"):
        for name in imported_modules(path):
            if name == CANDIDATE or name.startswith(CANDIDATE + "."):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_an_import_of_the_judge(tmp_path, monkeypatch):
    """The check itself: a lazy relative import of the judge, two hops away, is found."""
    import sys

    module = sys.modules[__name__]
    fake = tmp_path / "sandbox"
    (fake / "candidate").mkdir(parents=True)
    (fake / "crossing").mkdir()
    (fake / "judge").mkdir()
    for pkg in ("", "candidate", "crossing", "judge"):
        (fake / pkg / "__init__.py").write_text("")
    (fake / "candidate" / "a.py").write_text("from ..crossing import b\n")
    (fake / "crossing" / "b.py").write_text("def f():\n    from ..judge.pool import EvalPool\n")
    (fake / "judge" / "pool.py").write_text("EvalPool = 1\n")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    chains = reached(fake / "candidate" / "a.py")
    assert chains["kernelwright.sandbox.judge.pool"] == [
        "kernelwright.sandbox.candidate.a",
        "kernelwright.sandbox.crossing.b",
        "kernelwright.sandbox.judge.pool",
    ]
