"""Honest kernels that failed for the interpreter's reasons (issue 20) are accepted on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.sandbox import EvalConfig, evaluate
from kernelwright.sandbox.candidate import tritoncompat

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
# Judged as every candidate is: in its own process, under the OS sandbox where it runs.
CONFIG = EvalConfig(timing=False, compile_baseline=False)

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="the interpreter's behaviour"
)

# candidate file -> task; each kernel failed under the stock interpreter of triton 3.7.1
CASES = {
    "interp_libdevice_gelu.py": "gelu.py",  # libdevice.tanh returned None
    "interp_grid4_gelu.py": "gelu.py",  # "grid must have at most 3 dimensions"
    "interp_autotune_gelu.py": "gelu.py",  # "0 active drivers"
    "interp_eps_layernorm.py": "layernorm.py",  # 'float' object has no attribute 'to'
    "interp_dtype_layernorm.py": "layernorm.py",  # 'dtype' object has no attribute 'value'
    "interp_and_masks_layernorm.py": "layernorm.py",  # kept the column mask only
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow
def test_the_honest_kernel_is_accepted(name):
    source = (CANDIDATES / name).read_text()
    result = evaluate(HERE / "tasks" / CASES[name], source, CONFIG)
    assert result.status == "ok", result.summary()
    assert tritoncompat.MEMORY_NOTE in result.notes
    said_autotune = tritoncompat.AUTOTUNE_NOTE in result.notes
    assert said_autotune == (name == "interp_autotune_gelu.py")


def test_a_load_past_its_tensors_is_refused_not_read():
    # The honest layernorm with its row mask dropped reads and writes past x and y.
    source = (CANDIDATES / "interp_and_masks_layernorm.py").read_text()
    source = source.replace("(rows < n_rows) and (cols < n_cols)", "cols < n_cols")
    result = evaluate(HERE / "tasks" / "layernorm.py", source, CONFIG)
    assert result.status != "ok"
    assert "outside every tensor the kernel was given" in result.message, result.message


SCRIPT = r"""
import json
import torch
import triton
import triton.language as tl
from kernelwright.sandbox.candidate import tritoncompat

report = {"applied": tritoncompat.fix_interpreter(), "again": tritoncompat.fix_interpreter()}

@triton.jit
def bools(o_ptr, a, N: tl.constexpr):
    i = tl.arange(0, N)
    v = 0
    if a > 0 and a < 10:  # scalars: Python's `and`, as before
        v = 1
    w = 0
    if a < 0 or a > 1:
        w = 2
    c = True and 4  # plain Python values keep `and`'s value
    d = False or 0
    tl.store(o_ptr + i, i * 0 + v + w + c + d)

@triton.jit
def masks(x_ptr, o_ptr, n, m, BN: tl.constexpr, BM: tl.constexpr):
    r = tl.arange(0, BN)[:, None]
    c = tl.arange(0, BM)[None, :]
    keep = (r < n) and (c < m)
    drop = (r >= n) or (c >= m)
    tl.store(o_ptr + r * BM + c, tl.where(keep, 1, 0) + tl.where(drop, 10, 0))

o = torch.zeros(4, dtype=torch.int32)
bools[(1,)](o, 3, N=4)
report["bools"] = o.tolist()
o = torch.zeros(4, 4, dtype=torch.int32)
masks[(1,)](o, o, 2, 3, BN=4, BM=4)
report["masks"] = o.tolist()

# libdevice imported by name (an import fallback's form) and a host tensor descriptor, whose
# loads pass cache_policy= through the bound check.
from triton.language.extra.libdevice import tanh as th
from triton.tools.tensor_descriptor import TensorDescriptor

@triton.jit
def by_name(x_desc, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, th(x_desc.load([0])))

x = torch.linspace(-2, 2, 6)
o = torch.zeros(8)
by_name[(1,)](TensorDescriptor(x, [6], [1], [8]), o, N=8)
report["by_name"] = torch.allclose(o, torch.tanh(torch.cat([x, torch.zeros(2)])), atol=1e-6)

from triton.testing import do_bench
report["do_bench"] = do_bench(lambda: None)
report["notes"] = tritoncompat.notes()
print(json.dumps(report))
"""


def interpreted_report(tmp_path, name: str, script: str) -> dict:
    """Run `script` as a file under the interpreter in a fresh process; its last line of output,
    as JSON. A file, not `-c`: the interpreter rewrites a kernel only when it can read its
    source."""
    path = tmp_path / name
    path.write_text(script)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_and_or_are_element_wise_on_blocks_only(tmp_path):
    report = interpreted_report(tmp_path, "bool_ops.py", SCRIPT)
    assert report["applied"] == report["again"]
    assert set(report["applied"]) == {
        "index",
        "float_args",
        "libdevice",
        "dtype_value",
        "grid",
        "autotune",
        "bool_ops",
        "bounds",
        "warmup",
        "bf16",
    }
    # 1 (a in 0..10) + 2 (a > 1) + 4 (True and 4) + 0 (False or 0)
    assert report["bools"] == [7, 7, 7, 7]
    assert report["masks"] == [[1, 1, 1, 10]] * 2 + [[10] * 4] * 2
    assert report["by_name"] is True
    assert report["do_bench"] >= 0
    assert tritoncompat.DO_BENCH_NOTE in report["notes"]


WARMUP_SCRIPT = r"""
import json
import torch
import triton
import triton.language as tl
from kernelwright.sandbox.candidate import launches, tritoncompat

tritoncompat.fix_interpreter()
launches.install()

@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

def error(fn):
    try:
        fn()
    except Exception as e:
        return type(e).__name__
    return None

x = torch.randn(300)
y = torch.empty_like(x)
report = {}
compiled = double.warmup(x, y, 300, BLOCK=128, num_warps=2, grid=(1,))
compiled._init_handles()
report["warmup_launches"] = launches.launches(__name__)
compiled[(3, 1, 1)](x, y, 300, 64)  # the launch's constexpr is ignored: BLOCK stays 128
report["right"] = torch.equal(y, 2 * x)
report["launches"] = launches.launches(__name__)
report["num_warps"] = compiled.metadata.num_warps
report["short_grid"] = error(lambda: compiled[(3,)])
report["missing_constexpr"] = error(lambda: compiled[(3, 1, 1)](x, y, 300))
report["bad_warmup"] = error(lambda: double.warmup(x, y, BLOCK=128, grid=(1,)))
report["notes"] = tritoncompat.notes()
print(json.dumps(report))
"""


def test_warmup_returns_a_launchable_kernel_that_asks_what_the_compiled_one_does(tmp_path):
    report = interpreted_report(tmp_path, "warmup.py", WARMUP_SCRIPT)
    assert report["warmup_launches"] == {}  # compiling is not launching
    assert report["right"] and report["launches"] == {"double": 1}
    assert report["num_warps"] == 2
    assert report["short_grid"] == "IndexError"  # the compiled runner reads grid[0..2]
    assert report["missing_constexpr"] == "TypeError"  # the launcher takes every argument
    assert report["bad_warmup"] == "TypeError"
    assert tritoncompat.WARMUP_NOTE in report["notes"]
