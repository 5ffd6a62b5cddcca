"""Tests of sandbox/candidate/guard.py (and places.py): the audit-hook Guard, in subprocesses.

The Guard's hook cannot be removed once installed, so its tests run in subprocesses: a trusted
harness (its directory passed as trusted code) drives a candidate module in a sandbox directory
and reports, as JSON, what was denied and which rule was recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.sandbox.candidate import places

REPO = Path(__file__).resolve().parent.parent


# -- the Guard, in subprocesses --------------------------------------------------------------------

# The actions a candidate might take. The same source is loaded twice: once as the candidate
# (from the sandbox directory) and once as trusted harness code, to show that the Guard judges who
# asks, not what is asked.
ACTIONS = """
import collections, ctypes, dataclasses, gc, os, socket, subprocess, sys, typing

HOME = os.environ["KW_HOME"]
OUTSIDE = os.environ["KW_OUTSIDE"]


def net_connect():
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", 9))
    finally:
        s.close()


def net_resolve():
    socket.getaddrinfo("localhost", 80)


def process_run():
    subprocess.run(["true"], check=False)


def process_system():
    os.system("true")


def process_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def process_compiler_tool():
    # The tools Triton may run are still refused when the candidate asks for them itself.
    import shutil
    subprocess.run([shutil.which("cc") or "true", "--version"], capture_output=True)


def process_kill():
    os.kill(os.getpid(), 0)


def process_rlimit():
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))


def file_write_outside():
    open(os.path.join(OUTSIDE, "written.txt"), "w").close()


def file_mkdir_outside():
    os.makedirs(os.path.join(OUTSIDE, "made"), exist_ok=True)


def file_symlink_escape():
    link = os.path.join(HOME, "escape")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(OUTSIDE, link)


def file_read_secret():
    open(os.path.join(OUTSIDE, ".ssh", "id_rsa")).read()


def file_read_parent_environ():
    open(f"/proc/{os.getppid()}/environ", "rb").read()


def file_write_devnull():
    # subprocess.DEVNULL: Triton builds its launcher with cc's output sent there.
    with open(os.devnull, "w") as f:
        f.write("x")


def file_write_inside():
    open(os.path.join(HOME, "scratch.txt"), "w").close()


def ctypes_read_memory():
    ctypes.string_at(id(0), 8)


def ctypes_load_library():
    ctypes.CDLL(None)


def introspect_caller_frame():
    return sys._getframe(1).f_locals


def introspect_inspect():
    import inspect
    return inspect.currentframe().f_back


def introspect_all_frames():
    return sys._current_frames()


def introspect_gc():
    return len(gc.get_objects())


def introspect_settrace():
    sys.settrace(None)


def introspect_eval():
    return eval("1 + 1")


def introspect_code_object():
    return (lambda: 0).__code__.replace(co_name="x")


def patch_class_of_object():
    class A:
        pass

    class B:
        pass

    A().__class__ = B


def harmless_namedtuple():
    return collections.namedtuple("P", "x y")(1, 2)


def harmless_namedtuple_defaults():
    # namedtuple gives its own freshly made __new__ the defaults (object.__setattr__ event).
    return collections.namedtuple("P", "x y", defaults=(0,))(1)


def harmless_typing_namedtuple():
    # NamedTupleMeta sets __bases__ of the class it just built, and namedtuple the defaults.
    class Config(typing.NamedTuple):
        block: int
        warps: int = 4

    T = typing.TypeVar("T")

    class Box(typing.NamedTuple, typing.Generic[T]):
        item: T

    return Config(64), Box(1)


def patch_own_function_defaults():
    def scale(x, factor=1):
        return x * factor

    scale.__defaults__ = (2,)


def patch_namedtuple_new_defaults():
    # The candidate itself reassigning what namedtuple made is still a patch.
    P = collections.namedtuple("P", "x y", defaults=(0,))
    P.__new__.__defaults__ = (1,)


# (Reading __defaults__ is refused as introspection already: these assign literals.)
def patch_library_defaults():
    import textwrap
    textwrap.indent.__defaults__ = (None,)


def patch_defaults_through_stdlib():
    # functools sets the attribute, but on a library function the candidate chose.
    import functools, textwrap
    functools.update_wrapper(
        textwrap.indent, textwrap.indent, assigned=("__defaults__",), updated=()
    )


def patch_torch_defaults():
    import torch.nn.functional as F
    F.dropout.__defaults__ = (0.5, True, False)


def patch_triton_defaults():
    import triton.testing
    triton.testing.do_bench.__defaults__ = (25, 100, None, None, "mean")


def harmless_typevar():
    return typing.TypeVar("T")


def harmless_dataclass():
    @dataclasses.dataclass
    class Config:
        block: int = 64

    return Config()
"""

EXPECTED = {
    "net_connect": "sandbox-net",
    "net_resolve": "sandbox-net",
    "process_run": "sandbox-process",
    "process_system": "sandbox-process",
    "process_fork": "sandbox-process",
    "process_compiler_tool": "sandbox-process",
    "process_kill": "sandbox-process",
    "process_rlimit": "sandbox-process",
    "file_write_outside": "sandbox-file",
    "file_mkdir_outside": "sandbox-file",
    "file_symlink_escape": "sandbox-file",
    "file_read_secret": "sandbox-file",
    "file_read_parent_environ": "sandbox-file",
    "file_write_inside": None,
    "file_write_devnull": None,
    "ctypes_read_memory": "sandbox-ctypes",
    "ctypes_load_library": "sandbox-ctypes",
    "introspect_caller_frame": "sandbox-introspection",
    "introspect_inspect": "sandbox-introspection",
    "introspect_all_frames": "sandbox-introspection",
    "introspect_gc": "sandbox-introspection",
    "introspect_settrace": "sandbox-introspection",
    "introspect_eval": "sandbox-introspection",
    "introspect_code_object": "sandbox-introspection",
    "patch_class_of_object": "monkeypatch",
    "harmless_namedtuple": None,
    "harmless_namedtuple_defaults": None,
    "harmless_typing_namedtuple": None,
    "patch_own_function_defaults": "monkeypatch",
    "patch_namedtuple_new_defaults": "monkeypatch",
    "patch_library_defaults": "monkeypatch",
    "patch_defaults_through_stdlib": "monkeypatch",
    "patch_torch_defaults": "monkeypatch",
    "patch_triton_defaults": "monkeypatch",
    "harmless_typevar": None,
    "harmless_dataclass": None,
}

HARNESS = '''
import importlib.util, json, os, shutil, subprocess, sys, threading

import torch.nn.functional, triton.testing  # the libraries a candidate patches, loaded beforehand

from kernelwright.sandbox.candidate.guard import Guard

HOME, OUTSIDE = os.environ["KW_HOME"], os.environ["KW_OUTSIDE"]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import actions as trusted  # the same functions, as evaluator code

guard = Guard()
guard.install([HOME], None, trusted_code=[HERE])


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with guard.active():
        spec.loader.exec_module(module)
    return module


cand = load("cand", os.path.join(HOME, "cand.py"))


def attempt(fn, active):
    guard.reset()
    outcome, error = "allowed", None
    try:
        if active:
            with guard.active():
                fn()
        else:
            fn()
    except PermissionError as e:
        outcome, error = "denied", str(e)
    except Exception as e:  # the action itself failed (connection refused): not the guard
        error = type(e).__name__
    return {
        "outcome": outcome,
        "rules": [v.rule for v in guard.violations],
        "lines": [v.line for v in guard.violations],
        "message": error,
    }


report = {"actions": {}}
for name in json.loads(os.environ["KW_ACTIONS"]):
    report["actions"][name] = {
        "active": attempt(getattr(cand, name), True),
        "candidate_inactive": attempt(getattr(cand, name), False),
        "trusted_inactive": attempt(getattr(trusted, name), False),
    }

# A thread the candidate starts while active acts after the guard is off: still denied.
thread_source = """
import socket, threading
go = threading.Event()
def later():
    go.wait(5)
    try:
        socket.socket().close()
    except PermissionError:
        pass
def start():
    t = threading.Thread(target=later)
    t.start()
    return t
"""
with open(os.path.join(HOME, "threaded.py"), "w") as f:
    f.write(thread_source)
threaded = load("threaded", os.path.join(HOME, "threaded.py"))
guard.reset()
with guard.active():
    t = threaded.start()
threaded.go.set()
t.join()
report["thread"] = [v.rule for v in guard.violations]

# Triton's compiler tools, run by evaluator code while the guard is active.
tool = next((shutil.which(n) for n in ("cc", "gcc", "ld") if shutil.which(n)), None)
fake = os.path.join(HOME, "ptxas")
with open(fake, "w") as f:
    f.write("#!/bin/sh\\nexit 0\\n")
os.chmod(fake, 0o755)
runs = {
    "tool": [tool, "--version"] if tool else None,
    "fake_ptxas_in_sandbox": [fake],
    "shell": ["/bin/sh", "-c", "true"],
}
report["tools"] = {}
for key, argv in runs.items():
    if argv is None:
        continue
    report["tools"][key] = attempt(lambda: subprocess.run(argv, capture_output=True), True)
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def guard_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    home, outside, harness = root / "home", root / "outside", root / "harness"
    for d in (home, outside / ".ssh", harness):
        d.mkdir(parents=True)
    (outside / ".ssh" / "id_rsa").write_text("not a real key\n")
    (home / "cand.py").write_text(ACTIONS)
    (harness / "actions.py").write_text(ACTIONS)
    (harness / "harness.py").write_text(HARNESS)
    env = dict(
        os.environ,
        KW_HOME=str(home),
        KW_OUTSIDE=str(outside),
        KW_ACTIONS=json.dumps(sorted(EXPECTED)),
    )
    done = subprocess.run(
        [sys.executable, str(harness / "harness.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("action", sorted(EXPECTED))
def test_guard_denies_candidate_while_active(guard_report, action):
    got = guard_report["actions"][action]["active"]
    rule = EXPECTED[action]
    if rule is None:
        assert got["outcome"] == "allowed" and got["rules"] == [], got
    else:
        assert got["outcome"] == "denied", got
        assert got["rules"][:1] == [rule], got
        assert got["lines"][0] > 0  # the message points at the candidate's line
        assert "sandbox: the candidate tried to" in got["message"]


@pytest.mark.parametrize("action", sorted(EXPECTED))
def test_guard_allows_trusted_code_while_inactive(guard_report, action):
    got = guard_report["actions"][action]["trusted_inactive"]
    assert got["outcome"] == "allowed" and got["rules"] == [], got


@pytest.mark.parametrize("action", sorted(a for a, rule in EXPECTED.items() if rule))
def test_guard_denies_candidate_code_even_while_inactive(guard_report, action):
    # A thread or finalizer left behind runs when the guard is off; who asks still counts.
    got = guard_report["actions"][action]["candidate_inactive"]
    assert got["outcome"] == "denied" and got["rules"][:1] == [EXPECTED[action]], got


def test_guard_denies_a_leftover_thread(guard_report):
    assert guard_report["thread"] == ["sandbox-net"]


def test_guard_lets_triton_run_real_compiler_tools(guard_report):
    tools = guard_report["tools"]
    if "tool" not in tools:
        pytest.skip("no cc, gcc or ld on this machine")
    assert tools["tool"]["outcome"] == "allowed", tools["tool"]
    assert tools["fake_ptxas_in_sandbox"]["rules"] == ["sandbox-process"]
    assert tools["shell"]["rules"] == ["sandbox-process"]


INTERPRETER_KERNEL = """
import collections
import dataclasses
import typing

import torch
import triton
import triton.language as tl

Pair = collections.namedtuple("Pair", "a b")
Tiles = collections.namedtuple("Tiles", "block warps", defaults=(4,))
T = typing.TypeVar("T")


class Meta(typing.NamedTuple):
    block: int = 64
    warps: int = 4


@dataclasses.dataclass
class Launch:
    block: int = 64


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def run(x):
    y = torch.empty_like(x)
    block = Launch().block
    assert Tiles(block).warps == Meta().warps
    _double[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y
"""

INTERPRETER_HARNESS = """
import importlib.util, json, os, sys

os.environ["TRITON_INTERPRET"] = "1"
import torch
import triton

from kernelwright.sandbox.candidate.guard import Guard

HOME = os.environ["KW_HOME"]
readable = [HOME, sys.prefix, sys.base_prefix, "/usr", "/lib", "/etc", "/proc/self", "/sys", "/dev"]
readable += [p for p in sys.path if p and os.path.isdir(p)]
guard = Guard()
guard.install([HOME], readable, trusted_code=[os.path.dirname(os.path.abspath(__file__))])
spec = importlib.util.spec_from_file_location("kern", os.path.join(HOME, "kern.py"))
kern = importlib.util.module_from_spec(spec)
x = torch.randn(300)
with guard.active():
    spec.loader.exec_module(kern)
    first, second = kern.run(x), kern.run(x)
ok = torch.equal(first, 2 * x) and torch.equal(second, 2 * x)
print(json.dumps({"ok": ok, "violations": [str(v) for v in guard.violations]}))
"""


def run_json(script: Path, env: dict[str, str], timeout: float) -> dict:
    """Run a harness script in a fresh interpreter; its last stdout line is a JSON report."""
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_guard_does_not_disturb_a_triton_interpreter_kernel(tmp_path):
    home, harness = tmp_path / "home", tmp_path / "harness"
    home.mkdir()
    harness.mkdir()
    (home / "kern.py").write_text(INTERPRETER_KERNEL)
    (harness / "run.py").write_text(INTERPRETER_HARNESS)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(KW_HOME=str(home), TRITON_CACHE_DIR=str(home / "triton"), TMPDIR=str(home))
    report = run_json(harness / "run.py", env, timeout=300)
    assert report == {"ok": True, "violations": []}


PEEK = """
import sys


def caller_name():
    return sys._getframe(1).f_code.co_name
"""

# The harnesses below share it: the rules a call breaks, with the guard on or off.
HARNESS_RULES = """
def rules(fn, active=False):
    guard.reset()
    try:
        if active:
            with guard.active():
                fn()
        else:
            fn()
    except PermissionError:
        pass
    return [v.rule for v in guard.violations]
"""

PATH_INSTALL_HARNESS = (
    """
import importlib, importlib.util, json, os, sys

from kernelwright.sandbox.candidate.guard import Guard

HOME, DEPS, PROJECT = os.environ["KW_HOME"], os.environ["KW_DEPS"], os.environ["KW_PROJECT"]
sys.path[:0] = [DEPS, PROJECT]
import early  # imported before the guard, as torch imports typing_extensions

guard = Guard()
guard.install([HOME], None)
spec = importlib.util.spec_from_file_location("cand", os.path.join(HOME, "cand.py"))
cand = importlib.util.module_from_spec(spec)
with guard.active():
    spec.loader.exec_module(cand)  # the guard is armed from here on

"""
    + HARNESS_RULES
    + """

print(json.dumps({
    "early": rules(early.caller_name),
    "late_install": rules(importlib.import_module("late").caller_name),
    "project": rules(importlib.import_module("projmod").caller_name),
    "candidate": rules(cand.caller_name),
}))
"""
)


def test_guard_trusts_dependencies_installed_outside_site_packages(tmp_path):
    """A `pip install --target` directory on PYTHONPATH is the environment, not the candidate.

    On the H200 image typing_extensions came from such a directory: after a first candidate had
    armed the guard, its sys._getframe (called by torch.compile of the next task's reference)
    was taken for a candidate's introspection and every later baseline crashed.
    """
    home, deps, project, harness = (tmp_path / d for d in ("home", "deps", "project", "harness"))
    for d in (home, deps / "early-1.0.dist-info", project, harness):
        d.mkdir(parents=True)
    for path in (deps / "early.py", deps / "late.py", project / "projmod.py", home / "cand.py"):
        path.write_text(PEEK)
    (harness / "run.py").write_text(PATH_INSTALL_HARNESS)
    env = dict(os.environ, KW_HOME=str(home), KW_DEPS=str(deps), KW_PROJECT=str(project))
    report = run_json(harness / "run.py", env, timeout=120)
    assert report["early"] == []  # imported before install
    assert report["late_install"] == []  # imported later from the same install directory
    # A plain directory on the path (a project, a runs folder) stays the candidate's kind.
    assert report["project"] == ["sandbox-introspection"]
    assert report["candidate"] == ["sandbox-introspection"]


def test_a_module_with_a_relative_file_name_trusts_nothing(tmp_path, monkeypatch):
    """torch.ops' __file__ is "_ops.py": resolved against the working directory it would trust
    a file there that nobody imported."""
    import types

    monkeypatch.chdir(tmp_path)
    fake = types.ModuleType("kw_relative_file")
    fake.__file__ = "relative_name.py"
    monkeypatch.setitem(sys.modules, "kw_relative_file", fake)
    trusted = places._environment_code((), ())
    assert not any(p.endswith("relative_name.py") for p in trusted), trusted
    assert str(tmp_path) not in trusted


GENERATED_HELPER = """
def target():
    return 1


def evaluate(expr):
    return eval(expr, {"target": target})


def make(source):
    namespace = {"target": target}
    exec(source, namespace)
    return namespace["peek"]
"""

GENERATED_CANDIDATE = """
import generated_helper


def build():
    return generated_helper.make("def peek():\\n    return target.__code__\\n")


LATE = []


class Leftover:
    def __del__(self):  # runs when the evaluator drops it, with the guard off
        LATE.append(generated_helper.make("def peek():\\n    return target.__code__\\n"))


def leave():
    return Leftover()
"""

GENERATED_HARNESS = (
    """
import importlib.util, json, os, sys

from kernelwright.sandbox.candidate.guard import Guard

HOME, HERE = os.environ["KW_HOME"], os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generated_helper

guard = Guard()
guard.install([HOME], None, trusted_code=[HERE])
spec = importlib.util.spec_from_file_location("cand", os.path.join(HOME, "cand.py"))
cand = importlib.util.module_from_spec(spec)
with guard.active():
    spec.loader.exec_module(cand)  # the guard is armed from here on
    peek = cand.build()  # source the candidate had generated for it
    left = cand.leave()
del left  # its finalizer has code generated while no candidate code is active

"""
    + HARNESS_RULES
    + """

print(json.dumps({
    "evaluator_eval": rules(lambda: generated_helper.evaluate("target.__code__")),
    "evaluator_eval_again": rules(lambda: generated_helper.evaluate("target.__code__")),
    "eval_while_candidate_runs": rules(
        lambda: generated_helper.evaluate("target.__code__"), active=True
    ),
    "candidate_generated": rules(peek),
    "generated_in_a_finalizer": rules(cand.LATE[0]),
}))
"""
)


def test_generated_code_is_judged_by_who_had_it_generated(tmp_path):
    """torch evaluates guard names such as "L['self'].forward.__code__" as generated source.

    On the H200 that eval, in torch.compile of the reference after a candidate had armed the
    guard, was taken for the candidate reading a code object. Generated code the evaluator's side
    runs while no candidate code does is its own; what a candidate had generated (through any
    helper) stays the candidate's, and so does anything generated while candidate code runs.
    """
    home, harness = tmp_path / "home", tmp_path / "harness"
    home.mkdir()
    harness.mkdir()
    (home / "cand.py").write_text(GENERATED_CANDIDATE)
    (harness / "generated_helper.py").write_text(GENERATED_HELPER)
    (harness / "run.py").write_text(GENERATED_HARNESS)
    report = run_json(harness / "run.py", dict(os.environ, KW_HOME=str(home)), timeout=120)
    assert report["evaluator_eval"] == []
    assert report["evaluator_eval_again"] == []
    assert report["eval_while_candidate_runs"] == ["sandbox-introspection"]
    assert report["candidate_generated"] == ["sandbox-introspection"]
    assert report["generated_in_a_finalizer"] == ["sandbox-introspection"]


def test_guard_trace_writes_each_denials_stack(tmp_path):
    """KERNELWRIGHT_GUARD_TRACE names a file where every denial leaves its stack, each frame
    with the kind the guard gave it: a false alarm's cause shows without a debugger."""
    home, harness = tmp_path / "home", tmp_path / "harness"
    home.mkdir()
    harness.mkdir()
    (home / "cand.py").write_text(GENERATED_CANDIDATE)
    (harness / "generated_helper.py").write_text(GENERATED_HELPER)
    (harness / "run.py").write_text(GENERATED_HARNESS)
    trace = tmp_path / "trace.txt"
    env = dict(os.environ, KW_HOME=str(home), KERNELWRIGHT_GUARD_TRACE=str(trace))
    report = run_json(harness / "run.py", env, timeout=120)
    assert report["candidate_generated"] == ["sandbox-introspection"]
    text = trace.read_text()
    assert text.count("object.__getattr__ __code__") == 3  # one record per denial
    assert "[guard on]" in text and "[guard off]" in text
    assert "<string>:2 peek [candidate, generated for the candidate]" in text
    assert f"{harness / 'generated_helper.py'}:7 evaluate [trusted]" in text


STACKED_GENERATED_HARNESS = (
    """
import importlib.util, json, os, sys

HOME, HERE = os.environ["KW_HOME"], os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generated_helper

from kernelwright.sandbox.candidate.guard import Guard

CALL = "def peek(fn):\\n    return fn()\\n"
early = generated_helper.make(CALL)  # exec'd before the guard exists (torch's dataclasses)
guard = Guard()
guard.install([HOME], None, trusted_code=[HERE])
spec = importlib.util.spec_from_file_location("cand", os.path.join(HOME, "cand.py"))
cand = importlib.util.module_from_spec(spec)
with guard.active():
    spec.loader.exec_module(cand)  # armed from here on
    lazy = cand.touch()  # a library module imported while candidate code runs

"""
    + HARNESS_RULES
    + """

def generate_then_eval():
    for i in range(6000):  # torch.compile on a GPU generates thousands of functions
        generated_helper.make(f"def peek():\\n    return {i}\\n")
    return generated_helper.evaluate("target.__code__")


late = generated_helper.make(CALL)
print(json.dumps({
    "under_code_generated_before_install": rules(
        lambda: early(lambda: generated_helper.evaluate("target.__code__"))
    ),
    "under_a_generated_frame_after_much_generation": rules(lambda: late(generate_then_eval)),
    "under_code_a_lazy_import_generated": rules(
        lambda: lazy(lambda: generated_helper.evaluate("target.__code__"))
    ),
    "under_candidate_generated_code": rules(
        lambda: cand.build_caller()(lambda: generated_helper.evaluate("target.__code__"))
    ),
}))
"""
)


def test_evaluator_code_generated_under_generated_frames_stays_the_evaluators(tmp_path):
    """On the H200, from a worker's second or third task on, guard code torch generated for the
    reference was taken for the candidate's: a generated frame under it was not (or no longer:
    the registry kept 4096) known to be the evaluator's, or was library code generated by an
    import a candidate's call set off. A generated frame makes new code the candidate's only if
    it was generated by or for the candidate."""
    home, harness = tmp_path / "home", tmp_path / "harness"
    home.mkdir()
    harness.mkdir()
    (home / "cand.py").write_text(
        "import generated_helper\n\n\ndef build_caller():\n"
        "    return generated_helper.make('def peek(fn):\\n    return fn()\\n')\n\n\n"
        "def touch():\n    import lazy_lib\n\n    return lazy_lib.RUN\n"
    )
    (harness / "generated_helper.py").write_text(GENERATED_HELPER)
    # A library whose import generates code (dataclasses, namedtuples do).
    (harness / "lazy_lib.py").write_text(
        "import generated_helper\n\n"
        "RUN = generated_helper.make('def peek(fn):\\n    return fn()\\n')\n"
    )
    (harness / "run.py").write_text(STACKED_GENERATED_HARNESS)
    report = run_json(harness / "run.py", dict(os.environ, KW_HOME=str(home)), timeout=120)
    assert report["under_code_generated_before_install"] == []
    assert report["under_a_generated_frame_after_much_generation"] == []
    assert report["under_code_a_lazy_import_generated"] == []
    # What the candidate had generated stays the candidate's: code generated under it too.
    assert report["under_candidate_generated_code"] == ["sandbox-introspection"]


COMPILED_REFERENCE = """
def target():
    return 1


# What torch.compile's output module does on import: have code generated (torch's guards read
# names such as "L['self'].forward.__code__") while this module is on the stack.
namespace = {"target": target}
exec("def peek():\\n    return target.__code__\\n", namespace)
peek = namespace["peek"]
"""

WORKER_LAYOUT_HARNESS = (
    """
import importlib.util, json, os, sys
from pathlib import Path

from kernelwright.sandbox.crossing.isolation import worker_env
from kernelwright.sandbox.candidate.process import install_guard

home, private = Path(os.environ["KW_HOME"]), Path(os.environ["KW_PRIVATE"])
env = worker_env(dict(os.environ), home=home, private=private, device="cpu")
inductor = Path(env["TORCHINDUCTOR_CACHE_DIR"])
inductor.mkdir(parents=True)
(inductor / "compiled_ref.py").write_text(os.environ["KW_COMPILED"])
guard = install_guard(home, private, also_trusted=[os.path.dirname(os.path.abspath(__file__))])


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""
    + HARNESS_RULES
    + """

with guard.active():
    load("cand", home / "cand.py")  # a first candidate has armed the guard
guard.reset()
try:
    load("compiled_ref", inductor / "compiled_ref.py").peek()  # the next task's baseline
except PermissionError:
    pass
print(json.dumps({
    "baseline": [v.rule for v in guard.violations],
    "candidate_reads_cache": rules(
        lambda: open(inductor / "compiled_ref.py").read(), active=True
    ),
    "candidate_writes_cache": rules(
        lambda: open(inductor / "planted.py", "w").write("x = 1"), active=True
    ),
}))
"""
)


def test_the_reference_compiled_after_a_candidate_is_the_evaluators(tmp_path):
    """torch.compile's caches live in the worker's private directory, not the candidate's home.

    On the H200, inductor's output module (under the home) counted as candidate code: the guard
    code torch generated while it was on the stack was judged the candidate's, and the baseline
    of every task after a worker's first candidate failed with "object.__getattr__ __code__".
    A candidate can neither read that directory nor plant code in it.
    """
    home, private, harness = tmp_path / "home", tmp_path / "evaluator", tmp_path / "harness"
    for d in (home, private, harness):
        d.mkdir()
    (home / "cand.py").write_text("x = 1\n")
    (harness / "run.py").write_text(WORKER_LAYOUT_HARNESS)
    env = dict(
        os.environ, KW_HOME=str(home), KW_PRIVATE=str(private), KW_COMPILED=COMPILED_REFERENCE
    )
    report = run_json(harness / "run.py", env, timeout=120)
    assert report["baseline"] == []
    assert report["candidate_reads_cache"] == ["sandbox-file"]
    assert report["candidate_writes_cache"] == ["sandbox-file"]
