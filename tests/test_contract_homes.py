"""One home per contract (issue 26): the candidate key of a run directory is run/rundir.py's, the
`# tune:` format codegen/tunables.py's. Each is written by its home and read back by its home's
parser; and no other package module spells either out again (a string constant that builds or
matches a key, or writes or reads the tune mark), so a second definition fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from test_architecture_map import python_files

from kernelwright.agents.state import Candidate
from kernelwright.codegen.tunables import (
    TUNABLES,
    declaration,
    tune_constants,
    tune_line,
    with_values,
)
from kernelwright.run.rundir import (
    CANDIDATE_KEY,
    RunDir,
    candidate_key,
    parse_candidate_key,
)

ROOT = Path(__file__).resolve().parent.parent


def package_modules() -> list[Path]:
    """The package's Python files as git sees them (no tests, benchmarks or shared/ copy)."""
    skip = ("tests/", "benchmarks/", "shared/", "prompts/")
    return [p for p in python_files(ROOT) if not p.relative_to(ROOT).as_posix().startswith(skip)]


def string_constants(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a module, f-strings' literal parts included,
    docstrings left out (they describe a contract, they do not define it)."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def spelled_outside(pattern: str, home: str) -> list[str]:
    found = []
    for path in package_modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel == home:
            continue
        found += [f"{rel}:{n}: {s!r}" for n, s in string_constants(path) if re.search(pattern, s)]
    return found


# A piece of a candidate key: "round_" or "cand_" followed by a number's pattern or placeholder, a
# glob, or the end of the piece (an f-string's literal part before its number).
KEY_PIECE = r"(round|cand)_(\(|\\d|\{|\*|$)"
# A piece of the tune format: the mark at the end of a piece (the writer's f-string part) or alone.
TUNE_PIECE = r"(^|#\s*)tune:\s*$"


@pytest.mark.parametrize("round_no, index", [(1, 1), (2, 3), (12, 10), (100, 1)])
def test_a_candidate_key_round_trips_through_its_one_parser(round_no, index, tmp_path) -> None:
    key = candidate_key(round_no, index)
    assert parse_candidate_key(key) == (round_no, index)
    assert re.fullmatch(CANDIDATE_KEY, key)
    assert Candidate(round=round_no, index=index).key == key  # the graph's candidate
    rundir = RunDir(tmp_path)
    assert rundir.relative(rundir.candidate_dir(round_no, index)) == key  # its directory
    assert parse_candidate_key(f"{key}/kernel.py") is None
    assert parse_candidate_key("round_x/cand_1") is None


def test_the_candidate_key_is_spelled_in_run_rundir_only() -> None:
    assert spelled_outside(KEY_PIECE, "run/rundir.py") == []
    home = [s for _, s in string_constants(ROOT / "run/rundir.py") if re.search(KEY_PIECE, s)]
    assert home, "run/rundir.py no longer holds the key: the test's pattern is out of date"


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_every_declaration_the_codegen_writes_reads_back(dtype) -> None:
    source = "\n".join(line for name in TUNABLES for line in declaration(name, dtype)) + "\n"
    read = {t.name: t for t in tune_constants(source)}
    assert list(read) == list(TUNABLES)
    for name, tunable in TUNABLES.items():
        half = dtype != "fp32" and tunable.half_default is not None
        assert read[name].value == (tunable.half_default if half else tunable.default)
        assert read[name].options == tunable.choices
    moved = {name: TUNABLES[name].choices[0] for name in TUNABLES}
    assert {t.name: t.value for t in tune_constants(with_values(source, moved))} == moved


def test_the_tune_format_reads_only_what_it_writes() -> None:
    assert tune_line("BLOCK", 64, (32, 64)) == "BLOCK = 64  # tune: 32, 64"
    source = "\n".join(
        [
            "BLOCK = 64  # tune: 32, 64",
            "WARPS = 4  # tune: two, four",  # not a list of ints: ignored, not guessed at
            "RATIO = 0.5  # tune: 1, 2",  # not an int
            "def f():",
            "    INNER = 8  # tune: 8, 16",  # not module-level
            "LATE = 1",
            "",
        ]
    )
    assert [(t.name, t.value, t.options) for t in tune_constants(source)] == [
        ("BLOCK", 64, (32, 64))
    ]


def test_the_tune_format_is_spelled_in_codegen_tunables_only() -> None:
    assert spelled_outside(TUNE_PIECE, "codegen/tunables.py") == []
    home = [
        s for _, s in string_constants(ROOT / "codegen/tunables.py") if re.search(TUNE_PIECE, s)
    ]
    assert home, "codegen/tunables.py no longer holds the mark: the test's pattern is out of date"
