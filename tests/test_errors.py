"""One root for kernelwright's exceptions (issue 26): every exception class of the package
derives from KernelwrightError and names whose fault it is; the CLI maps each fault to the exit
code the README documents."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

from kernelwright import cli, knobs
from kernelwright.commands.common import EXIT_FOR_FAULT
from kernelwright.errors import FAULTS, KernelwrightError

ROOT = Path(knobs.__file__).parent
# Not errors: SIGTERM unwinds like Ctrl-C (a KeyboardInterrupt, which `except Exception` must
# never catch).
EXEMPT = {"Terminated"}
BUILTIN_EXCEPTIONS = {
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}


def _exception_classes() -> dict[str, tuple[str, list[str]]]:
    """{class name: (module, base names)} of every class in the package whose bases reach a
    builtin exception, read from the source (no module is imported)."""
    classes: dict[str, tuple[str, list[str]]] = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0] in ("tests", "benchmarks"):
            continue
        module = ".".join(("kernelwright", *parts)).removesuffix(".py").removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                classes[node.name] = (module, bases)

    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in BUILTIN_EXCEPTIONS or name == "KernelwrightError":
            return True
        if name not in classes or name in seen:
            return False
        return any(is_exception(b, seen | {name}) for b in classes[name][1])

    return {name: spec for name, spec in classes.items() if is_exception(name)}


def test_every_exception_class_derives_from_the_root_and_names_its_fault():
    found = _exception_classes()
    assert len(found) >= 25, sorted(found)  # the walk found the package's exceptions
    for name, (module, _) in sorted(found.items()):
        if name in EXEMPT or name == "KernelwrightError":
            continue
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, KernelwrightError), f"{module}.{name} does not derive from it"
        assert cls.fault in FAULTS, f"{module}.{name}.fault = {cls.fault!r}"


def test_the_old_bases_are_kept():
    from kernelwright.run.lock import Busy
    from kernelwright.runtime.guard import GuardMismatch
    from kernelwright.sandbox.crossing.devmem import DeviceMemoryError

    assert issubclass(GuardMismatch, RuntimeError) and issubclass(DeviceMemoryError, RuntimeError)
    assert issubclass(Busy, Exception) and not issubclass(cli.Terminated, Exception)


def test_a_verdict_is_the_fault_its_status_and_rule_say():
    from kernelwright.sandbox.judge.verdict import Verdict

    assert Verdict("incorrect", "wrong").fault == "candidate"
    assert Verdict("crashed", "worker died", rule="evaluator").fault == "evaluator"
    assert Verdict("runtime_error", "reference raised", rule="task").fault == "task"


# The README: bad input and a task whose reference fails exit 2; a negative verdict exits 1, and
# so does an evaluator error (as suite and nightly do).
DOCUMENTED = {"configuration": 2, "task": 2, "candidate": 1, "evaluator": 1}


@pytest.mark.parametrize("fault", FAULTS)
def test_the_cli_maps_each_fault_to_its_exit_code(fault, tmp_path, monkeypatch, capsys):
    assert EXIT_FOR_FAULT == DOCUMENTED

    class Raised(KernelwrightError):
        pass

    Raised.fault = fault  # type: ignore[misc]

    def fails(args):
        raise Raised(f"a {fault} failure")

    import kernelwright.commands.runs as runs

    monkeypatch.setattr(runs, "cmd_runs", fails)
    assert cli.main(["runs", "--out", str(tmp_path)]) == DOCUMENTED[fault]
    err = capsys.readouterr().err
    assert err.endswith(f"kernelwright: a {fault} failure\n")
    assert ("Traceback" in err) == (fault == "evaluator")  # kernelwright's own bug keeps its stack
