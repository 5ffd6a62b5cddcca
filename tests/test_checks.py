"""Tests of sandbox/checks.py: static rules, the audit-hook Guard and the integrity snapshot.

Every static rule fires on the marked line, sees through renaming and obfuscation, and leaves
realistic candidates alone. The Guard's hook cannot be removed once installed, so its tests run
in subprocesses: a trusted harness (its directory passed as trusted code) drives a candidate module
in a sandbox directory and reports, as JSON, what was denied and which rule was recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kernelwright.sandbox import checks
from kernelwright.sandbox.checks import RULES, Violation, format_violations, static_check

REPO = Path(__file__).resolve().parent.parent

HEAD = """\
import torch
import torch.nn as nn
import triton
import triton.language as tl

"""
TAIL = """


@triton.jit
def _kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""


def candidate(body: str) -> str:
    """A valid candidate with `body` between its imports and its kernel."""
    return HEAD + textwrap.dedent(body).strip("\n") + TAIL


def marked_line(source: str) -> int:
    lines = [i for i, text in enumerate(source.splitlines(), 1) if "# <-" in text]
    assert len(lines) == 1, "a case marks exactly one line"
    return lines[0]


def rules_on(source: str, line: int) -> list[str]:
    return [v.rule for v in static_check(source) if v.line == line]


# -- realistic good candidates: no violation at all ------------------------------------------------

GOOD_ELEMENTWISE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    _gelu_kernel[grid](x, y, n, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return gelu(x)
"""

GOOD_AUTOTUNED_MATMUL = """
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language.extra import libdevice

CONFIGS = {
    "small": dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32),
    "large": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32),
}
NUM_WARPS = 4  # tune: 2, 4, 8


@triton.autotune(
    configs=[triton.Config(c, num_warps=NUM_WARPS, num_stages=3) for c in CONFIGS.values()],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_bias_gelu_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                            stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    out = 0.5 * acc * (1.0 + libdevice.erf(acc * 0.7071067811865476))
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, out,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = 1.0 / math.sqrt(in_features)
        self.tile = math.prod((2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        M, K = x.shape
        N = self.linear.weight.shape[0]
        w = self.linear.weight.t()
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"]))
        matmul_bias_gelu_kernel[grid](x, w, self.linear.bias, out, M, N, K,
                                      x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                      out.stride(0), out.stride(1))
        return out
"""

GOOD_CONV_EPILOGUE = """
import collections
import enum
import functools
import itertools
import operator
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@dataclass(frozen=True)
class Launch:
    block: int = 1024
    warps: int = 4


class Act(enum.Enum):
    RELU = 1


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def bias_act_kernel(x_ptr, bias_ptr, out_ptr, n, hw, C,
                    BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = (offs // hw) % C
    x = tl.load(x_ptr + offs, mask=mask) + tl.load(bias_ptr + c, mask=mask)
    y = tl.maximum(x, 0.0) + 0.0 * libdevice.tanh(x)
    tl.store(out_ptr + offs, y, mask=mask)


@functools.lru_cache(maxsize=None)
def launch_for(n: int) -> Launch:
    return Launch(block=1024 if n > 4096 else 256)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.act: Optional[Act] = Act.RELU

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        cfg = launch_for(n)
        hw = functools.reduce(operator.mul, list(itertools.chain(y.shape))[2:], 1)
        seen = collections.Counter([cfg.block])
        grid = (triton.cdiv(n, cfg.block),)
        bias_act_kernel[grid](y, self.bias, out, n, hw, y.shape[1], BLOCK=cfg.block,
                              num_warps=cfg.warps + 0 * len(seen))
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return out
"""

GOOD_SOFTMAX = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        props = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
        warps = 8 if BLOCK >= 2048 and props is not None else 4
        softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK=BLOCK,
                                  num_warps=warps)
        return y
"""

GOOD_ALIASED_JIT = """
import torch
from torch.nn import Module
from triton import jit as kernel, cdiv
import triton.language as tl


@kernel(do_not_specialize=["n"])
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _double[(cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
"""

GOOD = {
    "elementwise": GOOD_ELEMENTWISE,
    "autotuned-matmul": GOOD_AUTOTUNED_MATMUL,
    "conv-epilogue": GOOD_CONV_EPILOGUE,
    "softmax": GOOD_SOFTMAX,
    "aliased-jit": GOOD_ALIASED_JIT,
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_candidates_have_no_violation(name):
    assert static_check(GOOD[name]) == []


def test_shipped_examples_have_no_violation():
    examples = sorted((REPO / "prompts" / "examples").glob("*.py"))
    if not examples:
        pytest.skip("no prompt examples in this checkout")
    for path in examples:
        assert static_check(path.read_text()) == [], path.name


# -- each rule fires on its line -------------------------------------------------------------------

RULE_CASES = {
    "import": "import os  # <-",
    "builtin": "x = eval('1 + 1')  # <-",
    "dunder": "add = torch.Tensor.__add__  # <-",
    "introspection": "def f(g):\n    return g.gi_frame  # <-",
    "private": "torch._C._cuda_synchronize()  # <-",
    "monkeypatch": "torch.cuda.synchronize = lambda: None  # <-",
    "torch-compile": "fast = torch.compile(lambda x: x)  # <-",
    "stream": "side = torch.cuda.Stream()  # <-",
    "precision-flag": "torch.backends.cuda.matmul.allow_tf32 = True  # <-",
    "global-state": "torch.manual_seed(0)  # <-",
    "file-io": "w = torch.load('weights.pt')  # <-",
    "try": "try:  # <-\n    y = 1\nexcept Exception:\n    y = 2",
    "reference": "class Cheat(Model):  # <-\n    pass",
    "global": "def f():\n    global CACHE  # <-\n    CACHE = 1",
    "special-method": "class Box:\n    def __del__(self):  # <-\n        pass",
    "tensor-subclass": "class Lazy(torch.Tensor):  # <-\n    pass",
}

KERNEL = "@triton.jit\ndef k(x):\n    pass\n\n\n"
WHOLE_FILE_CASES = {
    "syntax": HEAD + "def broken(:  # <-\n    pass\n",
    "model-new": HEAD
    + "@triton.jit\ndef k(x):\n    pass\n\n\nclass ModelNew(Base):  # <-\n    pass\n",
    "no-triton": "# <-\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n",
}


def test_every_rule_has_a_case():
    assert set(RULE_CASES) | set(WHOLE_FILE_CASES) == set(RULES)


@pytest.mark.parametrize("rule", sorted(RULE_CASES))
def test_rule_fires_on_its_line(rule):
    source = candidate(RULE_CASES[rule])
    line = marked_line(source)
    assert rule in rules_on(source, line), format_violations(static_check(source))
    # The first violation is the one the pool reports: the case's own rule.
    assert static_check(source)[0].rule == rule


@pytest.mark.parametrize("rule", sorted(WHOLE_FILE_CASES))
def test_whole_file_rules(rule):
    source = WHOLE_FILE_CASES[rule]
    found = static_check(source)
    assert [v.rule for v in found] == [rule], format_violations(found)
    assert found[0].line == marked_line(source)


@pytest.mark.parametrize(
    "source",
    [
        HEAD + "@triton.jit\ndef k(x):\n    pass\n",  # no ModelNew at all
        HEAD + "@triton.jit\ndef k(x):\n    pass\nclass ModelNew(nn.Module, object):\n    pass\n",
        HEAD
        + "@triton.jit\ndef k(x):\n    pass\n@dataclass\nclass ModelNew(nn.Module):\n    pass\n",
        candidate("class Other(nn.Module):\n    pass") + "ModelNew = Other\n",
    ],
    ids=["missing", "two-bases", "decorated", "rebound"],
)
def test_model_new_shapes(source):
    assert "model-new" in [v.rule for v in static_check(source)]


@pytest.mark.parametrize(
    "decorators",
    ["@triton.jit", "@triton.autotune(configs=[], key=[])\n@triton.jit", "@triton.jit()"],
)
def test_kernel_decorators_count(decorators):
    source = HEAD + f"{decorators}\ndef k(x):\n    pass\n\n\nclass ModelNew(nn.Module):\n    pass\n"
    assert static_check(source) == []


def test_kernel_must_be_top_level():
    source = HEAD + "def outer():\n    @triton.jit\n    def k(x):\n        pass\n\n\n"
    source += "class ModelNew(nn.Module):\n    pass\n"
    assert [v.rule for v in static_check(source)] == ["no-triton"]


# -- obfuscation: renamed, aliased, smuggled -------------------------------------------------------

OBFUSCATED = [
    ("import", "torch.os.system('true')  # <-"),
    ("import", "modules = torch.sys.modules  # <-"),
    ("import", "from torch import os as o  # <-"),
    ("import", "from torch import *  # <-"),
    ("import", "import torch.multiprocessing  # <-"),
    ("import", "from . import helpers  # <-"),
    ("monkeypatch", "import torch as t\nt.cuda.synchronize = print  # <-"),
    ("monkeypatch", "from torch import cuda as c\nc.synchronize = print  # <-"),
    ("monkeypatch", "c = torch.cuda\nc.synchronize = print  # <-"),
    ("monkeypatch", "from torch import Tensor\nTensor.add = print  # <-"),
    ("monkeypatch", "getattr(torch, 'cuda').synchronize = print  # <-"),
    ("monkeypatch", "setattr(torch.cuda, 'synchronize', print)  # <-"),
    ("monkeypatch", "def f(m=torch.cuda):\n    m.synchronize = print  # <-"),
    ("monkeypatch", "class Holder:\n    m = torch.cuda\n\n\nHolder.m.synchronize = print  # <-"),
    (
        "monkeypatch",
        "class Holder:\n    def __init__(self):\n        self.m = torch.cuda\n"
        "        self.m.synchronize = print  # <-",
    ),
    ("monkeypatch", "mods = [torch.cuda]\nmods[0].synchronize = print  # <-"),
    ("monkeypatch", "for m in (torch.cuda,):\n    m.synchronize = print  # <-"),
    (
        "monkeypatch",
        "@(lambda f: setattr(torch.cuda, 'synchronize', f))  # <-\ndef fake():\n    pass",
    ),
    ("monkeypatch", "def f(x):\n    type(x).add = print  # <-"),
    ("monkeypatch", "del torch.cuda.synchronize  # <-"),
    ("monkeypatch", "torch.cuda.Event.elapsed_time = print  # <-"),
    ("monkeypatch", "triton.testing.do_bench = print  # <-"),
    ("monkeypatch", "triton.knobs.runtime.launch_enter_hook = print  # <-"),
    ("monkeypatch", "torch.nn.modules.module.register_module_forward_hook(print)  # <-"),
    ("monkeypatch", "from torch.overrides import TorchFunctionMode  # <-"),
    ("monkeypatch", "def f(o):\n    o.x = 1  # <-"),
    ("builtin", "getattr(torch, 'cu' + 'da')  # <-"),
    ("builtin", "g = getattr  # <-\ng(torch, 'cuda')"),
    ("builtin", "import functools\nsync = functools.partial(setattr, torch.cuda)  # <-"),
    ("builtin", "import operator\nname = 'cuda'\noperator.attrgetter(name)(torch)  # <-"),
    ("builtin", "getattr(torch, '_C')  # <-"),
    ("builtin", "Lazy = type('Lazy', (torch.Tensor,), {})  # <-"),
    ("builtin", "import typing\nhints = typing.get_type_hints(print)  # <-"),
    ("builtin", "__import__('os')  # <-"),
    ("builtin", "globals()['CACHE'] = 1  # <-"),
    ("builtin", "exit(0)  # <-"),
    ("introspection", "import operator\nf = operator.attrgetter('__globals__')  # <-"),
    ("introspection", "def f(g):\n    return g.gi_frame.f_back.f_globals  # <-"),
    ("introspection", "subs = ().__class__.__bases__[0].__subclasses__()  # <-"),
    ("introspection", "text = '{0.__globals__}'.format(print)  # <-"),
    ("introspection", "match print:\n    case object(__globals__=g):  # <-\n        pass"),
    ("introspection", "b = __builtins__  # <-"),
    ("introspection", "d = torch.Tensor.__dict__  # <-"),
    ("dunder", "object.__setattr__(torch.cuda, 'synchronize', print)  # <-"),
    ("dunder", "torch.cuda.__setattr__('synchronize', print)  # <-"),
    ("precision-flag", "b = torch.backends  # <-\nb.cudnn.allow_tf32 = True"),
    ("precision-flag", "from torch.backends import cuda as bc  # <-"),
    ("precision-flag", "torch.set_float32_matmul_precision('high')  # <-"),
    ("precision-flag", "with torch.autocast('cuda'):  # <-\n    pass"),
    ("torch-compile", "from torch import compile as fast  # <-"),
    ("torch-compile", "class Net(nn.Module):\n    def go(self):\n        self.compile()  # <-"),
    ("torch-compile", "import torch._dynamo  # <-"),
    ("torch-compile", "scripted = torch.jit.script  # <-"),
    ("torch-compile", "from torch.utils.cpp_extension import load_inline  # <-"),
    ("torch-compile", "build = triton.runtime.build  # <-"),
    ("stream", "f = lambda m=torch.cuda: m.Stream()  # <-"),
    ("stream", "events = [m.Event() for m in [torch.cuda]]  # <-"),
    ("stream", "(m := torch.cuda).Stream()  # <-"),
    ("stream", "def get():\n    return torch.cuda\n\n\nget().Stream()  # <-"),
    ("stream", "d = {'c': torch.cuda}\nd['c'].CUDAGraph()  # <-"),
    ("stream", "from torch.cuda import Stream as S  # <-"),
    ("stream", "def f(x):\n    x.record_stream(None)  # <-"),
    ("private", "lib = triton._C  # <-"),
    ("private", "op = torch.ops._quantized.x  # <-"),
    ("global-state", "torch.cuda.set_per_process_memory_fraction(1.0)  # <-"),
    ("file-io", "t = torch.from_file('x.bin')  # <-"),
    ("tensor-subclass", "def f(x):\n    return x.as_subclass(torch.Tensor)  # <-"),
    ("special-method", "class Box:\n    __exit__ = lambda *a: True  # <-"),
    ("special-method", "class Box(metaclass=type):  # <-\n    pass"),
    ("special-method", "class Box:\n    def __torch_function__(self, *a):  # <-\n        pass"),
    ("reference", "x = 'get_init_inputs'  # <-"),
    ("reference", "def f():\n    return get_inputs()  # <-"),
    ("reference", "def f(Model):  # <-\n    pass"),
    ("global", "def f():\n    x = 1\n\n    def g():\n        nonlocal x  # <-\n\n    return g"),
    ("try", "def f():\n    try:  # <-\n        return 1\n    finally:\n        pass"),
    ("try", "try:  # <-\n    pass\nexcept* ValueError:\n    pass"),
]


@pytest.mark.parametrize(
    "rule,body", OBFUSCATED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(OBFUSCATED)]
)
def test_obfuscation_is_caught(rule, body):
    source = candidate(body)
    assert rule in rules_on(source, marked_line(source)), format_violations(static_check(source))


def test_every_rule_has_an_obfuscated_case():
    per_line_rules = set(RULES) - set(WHOLE_FILE_CASES)
    assert per_line_rules <= {rule for rule, _ in OBFUSCATED}


@pytest.mark.parametrize(
    "body",
    [
        "x = torch.cuda.synchronize()",  # the one CUDA sync a candidate may call
        "n = torch.cuda.get_device_properties(0).multi_processor_count",
        "import math\nk = math.prod((2, 3))",
        "CONFIGS = {'a': 1}\nCONFIGS['b'] = 2",  # a module-level dict of its own
        "class Tiles:\n    size = 4\n\n\nTiles.size = 8",  # its own class
        "x = torch.empty(4).contiguous().view(2, 2)",
        "def f(x):\n    return x.data_ptr() % 16 == 0",
        "def f(x):\n    return getattr(x, 'shape')",
        "from typing import Optional\nname = Optional.__name__",
        "@torch.no_grad()\ndef f(x):\n    return x",
    ],
)
def test_ordinary_code_is_not_flagged(body):
    assert static_check(candidate(body)) == []


def test_setattr_on_self_is_allowed():
    body = "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    body += "        setattr(self, 'scale', 2.0)"
    assert static_check(candidate(body)) == []


def test_format_violations_is_one_line_per_violation():
    found = static_check(candidate("import os\nx = eval('1')"))
    text = format_violations(found)
    assert text.splitlines() == [str(v) for v in found]
    assert text.startswith("line 6: [import] `import os` is not allowed")
    assert str(Violation("try", 3, 0, "remove it")) == "line 3: [try] remove it"


def test_null_bytes_are_a_syntax_violation():
    assert [v.rule for v in static_check("x = 1\x00")] == ["syntax"]


@pytest.mark.parametrize(
    "source",
    ["x = " + "+".join(["1"] * 200_000), "import torch\nx = torch" + ".a" * 5000],
    ids=["deep-binop", "deep-attribute"],
)
def test_absurd_nesting_is_a_violation_not_a_crash(source):
    assert [v.rule for v in static_check(source)] == ["syntax"]


def test_alias_explosion_is_bounded_and_reported():
    # `x = x.attr` twice grows x's possible module paths exponentially; the checker caps them
    # and refuses the file rather than letting a candidate exhaust the pool's memory or hide
    # a module behind the cap.
    body = "\n".join(f"x = x.a{i}" for i in range(200))
    source = candidate("x = torch\n" + body)
    assert "import" in [v.rule for v in static_check(source)]


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
    "harmless_typevar": None,
    "harmless_dataclass": None,
}

HARNESS = '''
import importlib.util, json, os, shutil, subprocess, sys, threading

from kernelwright.sandbox.checks import Guard

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
T = typing.TypeVar("T")


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
    _double[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y
"""

INTERPRETER_HARNESS = """
import importlib.util, json, os, sys

os.environ["TRITON_INTERPRET"] = "1"
import torch
import triton

from kernelwright.sandbox.checks import Guard

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

from kernelwright.sandbox.checks import Guard

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
    trusted = checks._environment_code((), ())
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

from kernelwright.sandbox.checks import Guard

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

from kernelwright.sandbox.checks import Guard

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

from kernelwright.sandbox.isolation import worker_env
from kernelwright.sandbox.candidate import install_guard

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


# -- integrity snapshot and threads ----------------------------------------------------------------


def test_snapshot_is_stable():
    assert checks.integrity_diff(checks.integrity_snapshot(), checks.integrity_snapshot()) == []


def _owner(path: str):
    """The object at a dotted path: a module, or a class inside one."""
    import importlib

    module, _, attr = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize(
    "owner,name",
    [
        ("torch.cuda", "synchronize"),
        ("torch.Tensor", "sub"),
        ("torch.Tensor", "__eq__"),
        ("torch.cuda.Event", "elapsed_time"),
        ("time", "perf_counter"),
        ("torch", "allclose"),
        ("triton.testing", "do_bench"),
        ("torch.nn.Module", "__call__"),
        ("builtins", "print"),
        ("kernelwright.sandbox.checks", "static_check"),
    ],
)
def test_patched_function_is_a_monkeypatch(monkeypatch, owner, name):
    before = checks.integrity_snapshot()
    monkeypatch.setattr(_owner(owner), name, lambda *a, **k: None)
    diff = checks.integrity_diff(before, checks.integrity_snapshot())
    assert ("monkeypatch", f"{owner}.{name} (replaced)") in diff


def test_a_changed_import_path_is_a_monkeypatch(monkeypatch, tmp_path):
    before = checks.integrity_snapshot()
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    diff = checks.integrity_diff(before, checks.integrity_snapshot())
    assert [rule for rule, what in diff if what.startswith("sys.path")] == ["monkeypatch"]


def test_restore_puts_patched_functions_back():
    import builtins

    import torch

    before = checks.integrity_snapshot()
    real_isinstance, real_sync = builtins.isinstance, torch.cuda.synchronize
    try:
        builtins.isinstance = lambda obj, cls: True  # would break the evaluator's own reply
        torch.cuda.synchronize = lambda *a, **k: None
        torch.Tensor.sub = lambda *a, **k: None  # shadows TensorBase.sub
        after = checks.integrity_snapshot()
        restored = checks.integrity_restore(before)
        shadow_left = "sub" in vars(torch.Tensor)
        isinstance_back = builtins.isinstance is real_isinstance
    finally:
        builtins.isinstance, torch.cuda.synchronize = real_isinstance, real_sync
        if (
            "sub" in vars(torch.Tensor)
            and vars(torch.Tensor)["sub"] is not before["torch.Tensor.sub"]
        ):
            del torch.Tensor.sub
    assert ("monkeypatch", "builtins.isinstance (replaced)") in checks.integrity_diff(before, after)
    assert {"builtins.isinstance", "torch.cuda.synchronize", "torch.Tensor.sub"} <= set(restored)
    assert isinstance_back
    assert not shadow_left  # the shadowing attribute is gone, not overwritten
    assert checks.integrity_diff(before, checks.integrity_snapshot()) == []


def test_changed_precision_flags_are_precision_flag():
    import torch

    before = checks.integrity_snapshot()
    matmul = torch.backends.cuda.matmul
    old_tf32, old_dtype = matmul.allow_tf32, torch.get_default_dtype()
    old_precision = getattr(matmul, "fp32_precision", None)  # torch >= 2.9 keeps both spellings
    try:
        torch.backends.cuda.matmul.allow_tf32 = not old_tf32
        torch.set_default_dtype(torch.float64)
        diff = checks.integrity_diff(before, checks.integrity_snapshot())
    finally:
        matmul.allow_tf32 = old_tf32
        if old_precision is not None:
            matmul.fp32_precision = old_precision
        torch.set_default_dtype(old_dtype)
    rules = {what.split(" ")[0]: rule for rule, what in diff}
    assert rules["torch.backends.cuda.matmul.allow_tf32"] == "precision-flag"
    assert rules["torch.get_default_dtype()"] == "precision-flag"
    assert diff[0][0] == "precision-flag"  # flags come first: the worker reports diff[0]
    assert checks.integrity_diff(before, checks.integrity_snapshot()) == []


def test_global_module_hook_is_a_monkeypatch():
    import torch

    before = checks.integrity_snapshot()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
    try:
        diff = checks.integrity_diff(before, checks.integrity_snapshot())
    finally:
        handle.remove()
    assert [rule for rule, what in diff if "_global_forward_hooks" in what] == ["monkeypatch"]


def test_python_threads_sees_every_thread():
    import _thread

    stop = threading.Event()
    started = threading.Event()
    raw: list[int] = []

    def raw_thread():
        raw.append(threading.get_ident())
        started.set()
        stop.wait(10)

    before = checks.python_threads()
    t = threading.Thread(target=stop.wait, args=(10,))
    t.start()
    _thread.start_new_thread(raw_thread, ())
    started.wait(10)
    try:
        extra = checks.python_threads() - before
        assert {t.ident, raw[0]} <= extra
    finally:
        stop.set()
        t.join()


def test_guard_rule_names_are_documented():
    assert {"sandbox-net", "sandbox-process", "sandbox-file", "sandbox-ctypes"} <= set(
        checks.GUARD_RULES
    )
    assert "sandbox-introspection" in checks.GUARD_RULES


REAL_CANDIDATES_HARNESS = """
import importlib.util, json, os, sys
from pathlib import Path

import torch

from kernelwright.codegen import generate
from kernelwright.sandbox.task import build_inputs, build_reference, load_task, task_namespace
from kernelwright.sandbox.tritoncompat import fix_interpreter_index
from kernelwright.sandbox.candidate import install_guard

fix_interpreter_index()  # as the worker does (triton 3.6's interpreter with NumPy 2.4)
home, private = Path(os.environ["KW_HOME"]), Path(os.environ["KW_PRIVATE"])
tasks = json.loads(os.environ["KW_TASKS"])
sources = {t: generate(t).source for t in tasks}  # before the guard: the codegen is ours
guard = install_guard(home, private)
for i, (path, shapes) in enumerate(tasks.items()):
    ns = task_namespace(load_task(path), shapes)
    ref = build_reference(ns, torch.float32, torch.device("cpu"), seed=1)
    (home / f"cand{i}.py").write_text(sources[path])
    spec = importlib.util.spec_from_file_location(f"cand{i}", home / f"cand{i}.py")
    module = importlib.util.module_from_spec(spec)
    with guard.active():
        spec.loader.exec_module(module)
        model = module.ModelNew(*ns["get_init_inputs"]())
    model.load_state_dict(ref.state_dict(), strict=False)
    for seed in range(2):
        inputs = build_inputs(ns, torch.float32, torch.device("cpu"), seed)
        with guard.active(), torch.no_grad():
            model(*inputs)
print(json.dumps({
    "violations": [v.message for v in guard.violations],
    "candidate_generated": sorted(
        {f"{c.co_filename}:{c.co_name}" for c in guard._candidate_generated.values()}
    ),
}))
"""


def test_library_code_generated_during_real_candidates_is_not_the_candidates(tmp_path):
    """Two of the fusion codegen's candidates run under the guard (the Triton interpreter here).

    With every exec during a candidate's call counted as the candidate's, the methods of
    dataclasses in modules first imported then (`__init__`, `__eq__`, `__setattr__`...) were
    registered as candidate code (this test fails so on b60ce66); on the H200 the evaluator's own
    later calls ran through such frames, and torch's guard code generated under them was refused
    as introspection.
    """
    home, private = tmp_path / "home", tmp_path / "evaluator"
    home.mkdir()
    private.mkdir()
    root = Path(__file__).resolve().parents[1] / "benchmarks" / "level1"
    tasks = {
        str(root / "35_frobenius_normalize.py"): {
            "batch_size": 2,
            "channels": 4,
            "height": 8,
            "width": 8,
        },
        str(root / "31_prod_rows.py"): {"batch_size": 4, "dim": 64},
    }
    (tmp_path / "run.py").write_text(REAL_CANDIDATES_HARNESS)
    env = dict(
        os.environ,
        KW_HOME=str(home),
        KW_PRIVATE=str(private),
        KW_TASKS=json.dumps(tasks),
        TRITON_INTERPRET="1",
        CUDA_VISIBLE_DEVICES="",
    )
    report = run_json(tmp_path / "run.py", env, timeout=300)
    assert report["violations"] == []
    assert report["candidate_generated"] == []
