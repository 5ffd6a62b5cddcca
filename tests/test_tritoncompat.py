"""The interpreter's tensor-to-int conversion works the same on triton 3.6 and 3.7."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Triton 3.6's interpreter converts with int(ndarray), which NumPy 2.4 refuses for the
# one-element arrays the interpreter holds; this script puts 3.6's conversion back on whatever
# Triton is installed, then runs a kernel whose loop starts at its program id (the fusion
# codegen's split reductions do this).
SCRIPT = r"""
import json, sys
import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

from kernelwright.sandbox.candidate.tritoncompat import fix_interpreter_index

stock = interpreter._patch_lang_tensor

def triton_36(tensor, scope):
    stock(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

interpreter._patch_lang_tensor = triton_36

@triton.jit
def strided_sum(x_ptr, out_ptr, n, n_programs):
    pid = tl.program_id(0)
    acc = tl.zeros([1], tl.float32)
    for i in range(pid, n, n_programs):
        acc += tl.load(x_ptr + i + tl.arange(0, 1))
    tl.store(out_ptr + pid + tl.arange(0, 1), acc)

def run():
    x = torch.arange(10, dtype=torch.float32)
    out = torch.zeros(3)
    strided_sum[(3,)](x, out, 10, 3)
    return out.tolist()

report = {}
try:
    report["before"] = run()
except Exception as e:
    report["before"] = type(e).__name__ + ": " + str(e)
report["fixed"] = fix_interpreter_index()
report["again"] = fix_interpreter_index()
report["wrapped_once"] = interpreter._patch_lang_tensor.__wrapped__ is triton_36
report["after"] = run()
print(json.dumps(report))
"""


def run_script(env_extra: dict[str, str]) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", **env_extra)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_loop_from_the_program_id_runs_under_triton_36s_conversion():
    report = run_script({"TRITON_INTERPRET": "1"})
    # With NumPy >= 2.4 (the CPU pin's), 3.6's conversion fails as it did on the H200 image.
    import numpy

    if tuple(int(p) for p in numpy.__version__.split(".")[:2]) >= (2, 4):
        assert "only 0-dimensional arrays" in report["before"]
    assert report["fixed"] is True and report["again"] is True
    assert report["wrapped_once"], "a second call must not wrap the patch twice"
    # program 0 sums 0+3+6+9, program 1 1+4+7, program 2 2+5+8
    assert report["after"] == [18.0, 12.0, 15.0]


def test_nothing_is_patched_outside_the_interpreter():
    from kernelwright.sandbox.candidate.tritoncompat import fix_interpreter_index

    if os.environ.get("TRITON_INTERPRET") == "1":  # pragma: no cover - the suite runs without it
        return
    assert fix_interpreter_index() is False
