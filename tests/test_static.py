"""Tests of sandbox/static/check.py (and rules.py): the static rules on a candidate's syntax tree.

Every static rule fires on the marked line, sees through renaming and obfuscation, and leaves
realistic candidates alone.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelwright.sandbox.rules import RULES, Violation, format_violations
from kernelwright.sandbox.static.check import static_check

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
    "global": "def f():\n    global __getattr__  # <-\n    __getattr__ = print",
    "special-method": "class Box:\n    def __del__(self):  # <-\n        pass",
    "tensor-subclass": "class Lazy(torch.Tensor):  # <-\n    pass",
}

KERNEL = "@triton.jit\ndef k(x):\n    pass\n\n\n"
WHOLE_FILE_CASES = {
    "syntax": HEAD + "def broken(:  # <-\n    pass\n",
    "model-new": HEAD
    + "@triton.jit\ndef k(x):\n    pass\n\n\nclass ModelNew(Base):  # <-\n    pass\n",
    "no-triton": "# <-\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n",
    "encoding": "#!/usr/bin/env python\n# -*- coding: latin-1 -*-  # <-\n" + HEAD,
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
    (
        "global",
        "def f():\n    __n__ = 1\n\n    def g():\n        nonlocal __n__  # <-\n\n    return g",
    ),
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


# -- the encoding: the checks read the text Python runs --------------------------------------------


@pytest.mark.parametrize(
    "head,line",
    [
        ("# coding: utf-7\n", 1),
        ("#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n", 2),
        ("# Exploit\n# coding=UTF-7\n", 2),
        ("# vim: set fileencoding=cp1252 :\n", 1),
        ("# coding: utf-8-sig\n", 1),  # a BOM's codec: no reason to declare it
        ("# coding: ascii\n", 1),
        ("# coding: no-such-codec\n", 1),
        ("x = 1\r# coding: utf-7\n", 1),  # a line of its own where \r ends lines
        ("#\x0c\n#\x1c coding: utf-7\n", 2),  # str.splitlines' separators split nothing
    ],
)
def test_a_declared_encoding_other_than_utf8_is_refused(head, line):
    found = static_check(head + candidate("x = 1"))
    assert [(v.rule, v.line) for v in found] == [("encoding", line)], format_violations(found)
    assert "UTF-8" in found[0].message


@pytest.mark.parametrize(
    "head",
    [
        "# coding: utf-8\n",
        "# -*- coding: UTF-8 -*-\n",
        "#!/usr/bin/env python3\n# coding: utf8\n",
        "# coding=utf_8\n",
        "# vim: set fileencoding=utf-8 :\n",
        "x = 1\ny = 2\n# coding: latin-1\n",  # a third line: Python reads no declaration there
    ],
)
def test_a_declared_utf8_is_accepted(head):
    assert static_check(head + candidate("x = 1")) == []


def test_a_byte_order_mark_is_refused_with_its_own_message():
    found = static_check("\ufeff" + candidate("x = 1"))
    assert [(v.rule, v.line) for v in found] == [("encoding", 1)]
    assert "byte-order mark" in found[0].message


def test_text_that_is_not_utf8_is_refused():
    # As read_text(errors="surrogateescape") leaves a latin-1 byte: no UTF-8 file holds it.
    found = static_check(candidate("x = 1\nname = 'caf\udce9'"))
    assert [(v.rule, v.line) for v in found] == [("encoding", 7)], format_violations(found)
    assert "not valid UTF-8" in found[0].message


def test_the_utf7_exploit_is_refused_before_its_code_is_read():
    source = (REPO / "tests" / "adversarial" / "encoding_cookie_utf7.py").read_text()
    hidden = "\nimport os\n"  # a statement only to a UTF-7 reading
    assert hidden in source.encode().decode("utf-7") and hidden not in source
    found = static_check(source)
    assert [(v.rule, v.line) for v in found] == [("encoding", 2)], format_violations(found)
    assert "utf-7" in found[0].message
