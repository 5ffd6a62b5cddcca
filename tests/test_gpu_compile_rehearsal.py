"""What Triton does to build a GPU kernel, rehearsed on CPU under the candidate's guard.

On the H200 every honest kernel was refused before it ran, twice over, by guard rules that no
CPU test reached (the interpreter compiles nothing): Triton's compile reads ptxas's output
through a pipe (`open(fd)` names 'pipe:[N]'), and its launcher build runs `file -b
<interpreter>` through platform.architecture(). A CUDA compile needs no GPU: Triton compiles to
a cubin for an explicit target with the ptxas it ships, and builds a C extension module the way
it builds its launcher. Both run here as a candidate's code under the guard, so a rule that
would refuse them fails on CPU first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CANDIDATE = '''
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.build import compile_module_from_src


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


def cubin():
    signature = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    source = ASTSource(add, signature=signature, constexprs={"BLOCK": 1024})
    return len(triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["cubin"])


LAUNCHER = """
#include <Python.h>
static struct PyModuleDef spec = {PyModuleDef_HEAD_INIT, "kw_launcher", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_kw_launcher(void) { return PyModule_Create(&spec); }
"""


def launcher():
    return compile_module_from_src(LAUNCHER, "kw_launcher").__name__
'''

HARNESS = """
import importlib.util, json, os, sys
from pathlib import Path

from kernelwright.sandbox.candidate.process import install_guard

# As in a process forked from the zygote: tempfile already cached the zygote's directory.
import tempfile
from kernelwright.sandbox.candidate.zygote import enter_home

assert tempfile.gettempdir() == os.environ["TMPDIR"]
home = Path(os.environ["KW_HOME"])
enter_home(home, {})
guard = install_guard(home)

def load():
    spec = importlib.util.spec_from_file_location("cand", home / "cand.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

with guard.active():
    cand = load()
report = {}
for step in sys.argv[1:]:
    guard.reset()
    try:
        with guard.active():
            value = getattr(cand, step)()
    except Exception as e:
        value = f"{type(e).__name__}: {e}"[:400]
    report[step] = {"value": value, "denied": [v.message for v in guard.violations]}
print(json.dumps(report))
"""


def _rehearse(tmp_path: Path, *steps: str) -> dict:
    zygote, harness = tmp_path / "zygote", tmp_path / "harness"
    home = zygote / "home"
    home.mkdir(parents=True)
    harness.mkdir()
    (home / "cand.py").write_text(CANDIDATE)
    (harness / "run.py").write_text(HARNESS)
    # The process starts as the zygote does (HOME and TMPDIR its own directory); the harness
    # then enters the candidate's home the way a forked candidate process does (zygote.py).
    env = dict(
        os.environ,
        KW_HOME=str(home),
        HOME=str(zygote),
        TMPDIR=str(zygote),
        PYTHONPATH=os.pathsep.join(
            [str(Path(__file__).parent), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    )
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, str(harness / "run.py"), *steps],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ptxas_runs() -> bool:
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    try:
        return subprocess.run([ptxas, "--version"], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(not _ptxas_runs(), reason="Triton's bundled ptxas does not run here")
def test_a_cuda_kernel_compiles_to_a_cubin_under_the_guard(tmp_path):
    # ptxas --version is read through a pipe; the cubin is written and read under TMPDIR.
    step = _rehearse(tmp_path, "cubin")["cubin"]
    assert step["denied"] == []
    assert isinstance(step["value"], int) and step["value"] > 0, step["value"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_launcher_build_runs_under_the_guard(tmp_path):
    # Triton keys the build on platform.architecture(), which runs `file -b <interpreter>`;
    # then cc builds the module in a tempfile directory, which must be the candidate's own (the
    # zygote's cached one was refused on the H200), and Triton loads it from its cache.
    report = _rehearse(tmp_path, "launcher")
    assert report["launcher"]["denied"] == []
    assert report["launcher"]["value"] == "kw_launcher", report["launcher"]["value"]


def test_file_is_allowed_only_for_the_interpreter(tmp_path):
    # The one `file` call allowed is platform's probe of this interpreter: not a file of choice.
    from kernelwright.sandbox.candidate.places import _is_interpreter_probe

    assert _is_interpreter_probe(["file", "-b", sys.executable])
    assert not _is_interpreter_probe(["file", "-b", "/etc/shadow"])
    assert not _is_interpreter_probe(["file", "/etc/shadow", sys.executable])
    assert not _is_interpreter_probe("file -b " + sys.executable)
