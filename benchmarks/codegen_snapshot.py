"""The offline coder's output over a set of tasks, written to a folder, or compared with one.

A refactoring of the codegen must not change a byte of what it emits. Take a snapshot before,
another after, and compare:

    python benchmarks/codegen_snapshot.py --out /tmp/before            # before the change
    python benchmarks/codegen_snapshot.py --out /tmp/after --compare /tmp/before

Tasks: benchmarks/level*/ and tests/tasks/, plus ../shared/kernelbench/level*/ where that folder
exists (its files are read here, never copied). For each task and dtype the snapshot holds the
candidate file, or the reason there is none, and the tunables: one file per (task, dtype).
Exit status 1 when --compare finds a difference (each one is listed).
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import hashlib
import itertools
import json
import sys
from pathlib import Path

from kernelwright.sandbox.contract import DTYPE_NAMES

ROOT = Path(__file__).resolve().parent.parent
DTYPES = DTYPE_NAMES


def task_files(extra: list[Path]) -> list[Path]:
    folders = [*sorted(ROOT.glob("benchmarks/level*")), ROOT / "tests" / "tasks"]
    shared = ROOT.parent / "shared" / "kernelbench"
    if shared.is_dir():
        folders += sorted(shared.glob("level*"))
    files = [f for d in folders for f in sorted(d.glob("*.py"))]
    return files + extra


def label(path: Path) -> str:
    """The snapshot name of a task: the same in every checkout (a worktree, a clean clone)."""
    real = path.resolve()
    # The repository's own tasks, then ../shared's; the path as given first (a worktree may
    # reach ../shared through a symbolic link), then as resolved.
    for candidate, base in itertools.product((path.absolute(), real), (ROOT, ROOT.parent)):
        if candidate.is_relative_to(base):
            rel = candidate.relative_to(base)
            break
    else:
        rel = Path(hashlib.sha1(str(real).encode()).hexdigest()[:8]) / path.name
    return str(rel).replace("/", "__").removesuffix(".py")


def emit(path: Path, dtype: str) -> str:
    from kernelwright.codegen import generate

    result = generate(path, dtype=dtype)
    head = json.dumps({"reason": result.reason, "tunables": result.tunables}, sort_keys=True)
    return head + "\n" + (result.source or "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder the snapshot is written to")
    p.add_argument("--compare", type=Path, help="an earlier snapshot to compare with")
    p.add_argument("--dtype", action="append", choices=DTYPES, help="default: all three")
    p.add_argument(
        "--only",
        action="append",
        metavar="GLOB",
        help="only tasks whose snapshot name matches (repeatable), e.g. '*level3__4*'; a "
        "comparison then covers only those names",
    )
    p.add_argument("tasks", nargs="*", type=Path, help="more task files")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    def chosen(name: str) -> bool:
        return not args.only or any(fnmatch.fnmatchcase(name, g) for g in args.only)

    for path in task_files(args.tasks):
        if not chosen(label(path)):
            continue
        for dtype in args.dtype or DTYPES:
            (args.out / f"{label(path)}.{dtype}.txt").write_text(emit(path, dtype))
    written = sorted(f.name for f in args.out.glob("*.txt") if chosen(f.name))
    print(f"{len(written)} snapshot file(s) in {args.out}")
    if args.compare is None:
        return 0
    before = sorted(f.name for f in args.compare.glob("*.txt") if chosen(f.name))
    differ = 0
    for name in sorted(set(before) | set(written)):
        old, new = args.compare / name, args.out / name
        if not old.exists() or not new.exists():
            print(f"only in {'the new' if new.exists() else 'the old'} snapshot: {name}")
            differ += 1
        elif old.read_bytes() != new.read_bytes():
            differ += 1
            print(f"differs: {name}")
            diff = difflib.unified_diff(
                old.read_text().splitlines(), new.read_text().splitlines(), lineterm="", n=1
            )
            print("\n".join(list(diff)[:40]))
    print(f"{differ} difference(s) over {len(set(before) | set(written))} file(s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
