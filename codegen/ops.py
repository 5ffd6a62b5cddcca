"""Op tables: which torch callables/methods/modules are which canonical op, and how each
pointwise op is written in Triton (operands already in the compute type, fp32 for floats)."""

from __future__ import annotations

import inspect
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Signatures, for binding positional and keyword arguments of a call to parameter names.
# ---------------------------------------------------------------------------------------------

SIGNATURES: dict[str, str] = {
    "unary": "input, inplace=False",
    "binary": "input, other, *, alpha=1, out=None",
    "div": "input, other, *, rounding_mode=None",
    "pow": "input, exponent",
    "clamp": "input, min=None, max=None",
    "clamp_min": "input, min",
    "clamp_max": "input, max",
    "where": "condition, input, other",
    "masked_fill": "input, mask, value",
    "attention_pattern": "query, key, value, drop_mask=None, scale=1.0",
    "attention": (
        "query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, "
        "enable_gqa=False"
    ),
    "leaky_relu": "input, negative_slope=0.01, inplace=False",
    "elu": "input, alpha=1.0, inplace=False",
    "celu": "input, alpha=1.0, inplace=False",
    "hardtanh": "input, min_val=-1.0, max_val=1.0, inplace=False",
    "softplus": "input, beta=1.0, threshold=20.0",
    "gelu": "input, approximate='none'",
    "threshold": "input, threshold, value, inplace=False",
    "shrink": "input, lambd=0.5",
    "dropout": "input, p=0.5, training=True, inplace=False",
    "to": "input, *args, **kwargs",
    "type_as": "input, other",
    "reduce": "input, dim=None, keepdim=False, *, dtype=None",
    "argreduce": "input, dim=None, keepdim=False",
    "maxmin": "input, dim=None, keepdim=False",
    "var": "input, dim=None, unbiased=None, keepdim=False, *, correction=None",
    "softmax": "input, dim=None, _stacklevel=3, dtype=None",
    "logsumexp": "input, dim, keepdim=False",
    "norm": "input, p='fro', dim=None, keepdim=False, out=None, dtype=None",
    "vector_norm": "input, ord=2, dim=None, keepdim=False, *, dtype=None",
    "normalize": "input, p=2.0, dim=1, eps=1e-12, out=None",
    "scan": "input, dim, *, dtype=None",
    "layer_norm": "input, normalized_shape, weight=None, bias=None, eps=1e-05",
    "rms_norm": "input, normalized_shape, weight=None, eps=None",
    "group_norm": "input, num_groups, weight=None, bias=None, eps=1e-05",
    "batch_norm": (
        "input, running_mean, running_var, weight=None, bias=None, training=False, "
        "momentum=0.1, eps=1e-05"
    ),
    "instance_norm": (
        "input, running_mean=None, running_var=None, weight=None, bias=None, "
        "use_input_stats=True, momentum=0.1, eps=1e-05"
    ),
    "linear": "input, weight, bias=None",
    "matmul": "input, other",
    "einsum": "equation, *operands",
    "addmm": "input, mat1, mat2, *, beta=1, alpha=1",
    "identity": "input",
    # size_average and reduce are the deprecated spellings of reduction, weight (newer torch)
    # scales each element: given, no pattern.
    "loss": "input, target, size_average=None, reduce=None, reduction='mean', weight=None",
    "smooth_l1": "input, target, size_average=None, reduce=None, reduction='mean', beta=1.0",
    "huber": "input, target, reduction='mean', delta=1.0, weight=None",
    "pairwise_distance": "x1, x2, p=2.0, eps=1e-06, keepdim=False",
    "triplet_margin_loss": (
        "anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, "
        "size_average=None, reduce=None, reduction='mean'"
    ),
    "cross_entropy": "input, target, weight=None, size_average=None, ignore_index=-100, "
    "reduce=None, reduction='mean', label_smoothing=0.0",
    "nan_to_num": "input, nan=0.0, posinf=None, neginf=None, *, out=None",
}

# Unary pointwise ops whose canonical name is the torch name.
UNARY = [
    "relu",
    "relu6",
    "sigmoid",
    "tanh",
    "silu",
    "mish",
    "selu",
    "hardsigmoid",
    "hardswish",
    "softsign",
    "logsigmoid",
    "tanhshrink",
    "abs",
    "neg",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "erf",
    "reciprocal",
    "square",
    "sign",
    "floor",
    "ceil",
    "round",
    "trunc",
    "logical_not",
]
BINARY = [
    "add",
    "sub",
    "mul",
    "maximum",
    "minimum",
    "fmod",
    "remainder",
    "logical_and",
    "logical_or",
]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]


@dataclass(frozen=True)
class Call:
    """A torch callable's meaning: canonical op and which signature binds its arguments."""

    op: str
    sig: str
    inplace: bool = False


def _calls() -> dict[Any, Call]:
    table: dict[Any, Call] = {}
    for name in UNARY:
        for owner in (torch, F, torch.special):
            fn = getattr(owner, name, None)
            if callable(fn):
                table.setdefault(fn, Call(name, "unary"))
    for name in BINARY + COMPARE:
        table[getattr(torch, name)] = Call(name, "binary")
    table[torch.true_divide] = Call("div", "div")
    table[torch.div] = Call("div", "div")
    table[torch.divide] = Call("div", "div")
    table[torch.multiply] = Call("mul", "binary")
    table[torch.subtract] = Call("sub", "binary")
    table[torch.pow] = Call("pow", "pow")
    table[torch.clamp] = Call("clamp", "clamp")
    table[torch.clip] = Call("clamp", "clamp")
    table[torch.clamp_min] = Call("clamp_min", "clamp_min")
    table[torch.clamp_max] = Call("clamp_max", "clamp_max")
    table[torch.where] = Call("where", "where")
    table[torch.masked_fill] = Call("masked_fill", "masked_fill")
    table[torch.nan_to_num] = Call("nan_to_num", "nan_to_num")
    table[F.relu] = Call("relu", "unary")
    table[F.relu_] = Call("relu", "unary", inplace=True)
    table[torch.relu_] = Call("relu", "unary", inplace=True)
    table[F.relu6] = Call("relu6", "unary")
    table[F.leaky_relu] = Call("leaky_relu", "leaky_relu")
    table[F.elu] = Call("elu", "elu")
    table[F.celu] = Call("celu", "celu")
    table[F.selu] = Call("selu", "unary")
    table[F.hardtanh] = Call("hardtanh", "hardtanh")
    table[F.softplus] = Call("softplus", "softplus")
    table[F.gelu] = Call("gelu", "gelu")
    table[F.threshold] = Call("threshold", "threshold")
    table[F.softshrink] = Call("softshrink", "shrink")
    table[F.hardshrink] = Call("hardshrink", "shrink")
    table[F.dropout] = Call("dropout", "dropout")
    for fn in (F.sigmoid, F.tanh, F.silu, F.mish, F.hardsigmoid, F.hardswish, F.softsign):
        table[fn] = Call(fn.__name__, "unary")
    table[F.logsigmoid] = Call("logsigmoid", "unary")
    table[F.tanhshrink] = Call("tanhshrink", "unary")
    for name in ("sum", "mean", "prod", "amax", "amin"):
        table[getattr(torch, name)] = Call(name, "reduce")
    table[torch.argmax] = Call("argmax", "argreduce")
    table[torch.argmin] = Call("argmin", "argreduce")
    table[torch.max] = Call("max", "maxmin")
    table[torch.min] = Call("min", "maxmin")
    table[torch.var] = Call("var", "var")
    table[torch.std] = Call("std", "var")
    table[torch.softmax] = Call("softmax", "softmax")
    table[torch.log_softmax] = Call("log_softmax", "softmax")
    table[F.softmax] = Call("softmax", "softmax")
    table[F.log_softmax] = Call("log_softmax", "softmax")
    table[torch.logsumexp] = Call("logsumexp", "logsumexp")
    table[torch.norm] = Call("norm", "norm")
    table[torch.linalg.vector_norm] = Call("vector_norm", "vector_norm")
    table[F.normalize] = Call("normalize", "normalize")
    table[torch.cumsum] = Call("cumsum", "scan")
    table[torch.cumprod] = Call("cumprod", "scan")
    table[F.layer_norm] = Call("layer_norm", "layer_norm")
    table[F.group_norm] = Call("group_norm", "group_norm")
    table[F.batch_norm] = Call("batch_norm", "batch_norm")
    table[F.instance_norm] = Call("instance_norm", "instance_norm")
    if hasattr(F, "rms_norm"):
        table[F.rms_norm] = Call("rms_norm", "rms_norm")
    table[F.linear] = Call("linear", "linear")
    table[F.mse_loss] = Call("mse_loss", "loss")
    table[F.l1_loss] = Call("l1_loss", "loss")
    table[F.smooth_l1_loss] = Call("smooth_l1_loss", "smooth_l1")
    table[F.huber_loss] = Call("huber_loss", "huber")
    table[F.pairwise_distance] = Call("pairwise_distance", "pairwise_distance")
    table[F.triplet_margin_loss] = Call("triplet_margin_loss", "triplet_margin_loss")
    table[F.cross_entropy] = Call("cross_entropy", "cross_entropy")
    table[torch.matmul] = Call("matmul", "matmul")
    table[torch.mm] = Call("matmul", "matmul")
    table[torch.bmm] = Call("matmul", "matmul")
    table[torch.addmm] = Call("addmm", "addmm")
    table[torch.einsum] = Call("einsum", "einsum")
    table[operator.add] = Call("add", "binary")
    table[operator.sub] = Call("sub", "binary")
    table[operator.mul] = Call("mul", "binary")
    table[operator.truediv] = Call("div", "div")
    table[operator.pow] = Call("pow", "pow")
    table[operator.neg] = Call("neg", "unary")
    table[operator.matmul] = Call("matmul", "matmul")
    table[operator.iadd] = Call("add", "binary", inplace=True)
    table[operator.isub] = Call("sub", "binary", inplace=True)
    table[operator.imul] = Call("mul", "binary", inplace=True)
    table[operator.itruediv] = Call("div", "div", inplace=True)
    for name in COMPARE:
        table[getattr(operator, name)] = Call(name, "binary")
    table[operator.and_] = Call("logical_and", "binary")
    table[operator.or_] = Call("logical_or", "binary")
    table[operator.invert] = Call("logical_not", "unary")
    return table


FUNCTIONS: dict[Any, Call] = _calls()


def _methods() -> dict[str, Call]:
    table: dict[str, Call] = {}
    for fn, call in FUNCTIONS.items():
        name = getattr(fn, "__name__", "")
        if getattr(torch.Tensor, name, None) is not None and fn.__module__ != "_operator":
            table.setdefault(name, call)
    table.update(
        {
            "div": Call("div", "div"),
            "true_divide": Call("div", "div"),
            "matmul": Call("matmul", "matmul"),
            "mm": Call("matmul", "matmul"),
            "bmm": Call("matmul", "matmul"),
            "clamp": Call("clamp", "clamp"),
            "clip": Call("clamp", "clamp"),
            "float": Call("float", "identity"),
            "half": Call("half", "identity"),
            "bfloat16": Call("bfloat16", "identity"),
            "to": Call("to", "to"),
            "type_as": Call("type_as", "type_as"),
            "contiguous": Call("identity", "identity"),
            "clone": Call("identity", "identity"),
            "norm": Call("norm", "norm"),
        }
    )
    inplace = {}
    for name, call in table.items():
        inplace_ops = ["div", "pow", "clamp", "clamp_min", "clamp_max", "masked_fill"]
        if call.op in UNARY + BINARY + COMPARE + inplace_ops:
            inplace[name + "_"] = Call(call.op, call.sig, inplace=True)
    table.update(inplace)
    return table


METHODS: dict[str, Call] = _methods()


def bind(sig: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments of a call by parameter name, defaults filled in."""
    bound = _signature(sig).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


_SIG_CACHE: dict[str, inspect.Signature] = {}


def _signature(sig: str) -> inspect.Signature:
    if sig not in _SIG_CACHE:
        namespace: dict[str, Any] = {}
        exec(f"def f({SIGNATURES[sig]}): pass", namespace)
        _SIG_CACHE[sig] = inspect.signature(namespace["f"])
    return _SIG_CACHE[sig]


# ---------------------------------------------------------------------------------------------
# Triton expressions for pointwise ops.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    """A kernel operand: its Triton expression and, for literals, the Python value."""

    expr: str
    const: Any = None

    @property
    def is_const(self) -> bool:
        return self.const is not None


# @triton.jit helpers a pointwise op may need, emitted into the file once when used. Written with
# tl primitives only: libdevice has no implementation in the interpreter, and these keep fp32
# accuracy (Kahan's tricks for log1p/expm1 cancel the rounding of exp/log near 0).
HELPERS: dict[str, str] = {
    "_expm1": '''@triton.jit
def _expm1(x):
    """exp(x) - 1: Taylor series below |x| = 0.25 (truncation < 1e-9 relative), exp(x) - 1
    above, where the subtraction loses at most 2 bits."""
    p = 0.001388888888888889 + x * 0.0001984126984126984
    p = 0.041666666666666664 + x * (0.008333333333333333 + x * p)
    p = x * (1.0 + x * (0.5 + x * (0.16666666666666666 + x * p)))
    return tl.where(tl.abs(x) < 0.25, p, tl.exp(x) - 1.0)
''',
    "_log1p": '''@triton.jit
def _log1p(x):
    """log(1 + x) without cancellation near 0: log(u) * x / (u - 1) with u = 1 + x (Kahan)."""
    u = 1.0 + x
    d = tl.where(u == 1.0, 1.0, u - 1.0)
    return tl.where(u == 1.0, x, tl.log(u) * (x / d))
''',
    "_tanh": '''@triton.jit
def _tanh(x):
    """tanh: odd Taylor series below |x| = 0.25 (truncation < 2e-8 relative), (1 - e) / (1 + e)
    with e = exp(-2|x|) above. One exp and one division: the SFU, not HBM, limits a tanh
    kernel, and libdevice is unavailable in the interpreter."""
    ax = tl.abs(x)
    x2 = x * x
    p = 0.13333333333333333 + x2 * (-0.05396825396825397 + x2 * 0.021869488536155203)
    p = x * (1.0 + x2 * (-0.3333333333333333 + x2 * p))
    e = tl.exp(-2.0 * ax)
    t = (1.0 - e) / (1.0 + e)
    return tl.where(ax < 0.25, p, tl.where(x < 0, -t, t))
''',
    "_mish": '''@triton.jit
def _mish(x):
    """x * tanh(softplus(x)) = x * n / (n + 2) with n = e^x (e^x + 2): one exp, one division,
    no cancellation (every term positive); tanh(softplus(x)) is 1 in fp32 past x = 20."""
    e = tl.exp(tl.minimum(x, 20.0))
    n = e * (e + 2.0)
    return tl.where(x > 20.0, x, x * (n / (n + 2.0)))
''',
}
HELPER_DEPS: dict[str, tuple[str, ...]] = {}

Emitter = Callable[[list[Operand], dict[str, Any]], str]
POINTWISE: dict[str, Emitter] = {}
# Helpers each op's expression calls.
USES: dict[str, tuple[str, ...]] = {}


def pointwise(name: str, uses: tuple[str, ...] = ()) -> Callable[[Emitter], Emitter]:
    def register(fn: Emitter) -> Emitter:
        POINTWISE[name] = fn
        USES[name] = uses
        return fn

    return register


def flt(value: float) -> str:
    """A float literal Triton accepts (inf/nan spelled through float())."""
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    if math.isnan(value):
        return 'float("nan")'
    return repr(float(value))


def _unary(name: str, template: str, uses: tuple[str, ...] = ()) -> None:
    pointwise(name, uses)(lambda a, attrs, t=template: t.format(x=a[0].expr, **attrs))


for _name, _template, *_uses in [
    ("relu", "tl.maximum({x}, 0.0)"),
    ("relu6", "tl.minimum(tl.maximum({x}, 0.0), 6.0)"),
    ("sigmoid", "tl.sigmoid({x})"),
    ("tanh", "_tanh({x})", ("_tanh",)),
    ("silu", "{x} * tl.sigmoid({x})"),
    ("mish", "_mish({x})", ("_mish",)),
    (
        "selu",
        "1.0507009873554805 * tl.where({x} > 0, {x}, 1.6732632423543772 * _expm1({x}))",
        ("_expm1",),
    ),
    ("hardsigmoid", "tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)"),
    ("hardswish", "{x} * tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0"),
    ("softsign", "{x} / (1.0 + tl.abs({x}))"),
    ("logsigmoid", "tl.minimum({x}, 0.0) - _log1p(tl.exp(-tl.abs({x})))", ("_log1p",)),
    ("tanhshrink", "{x} - _tanh({x})", ("_tanh",)),
    ("abs", "tl.abs({x})"),
    ("neg", "-{x}"),
    ("exp", "tl.exp({x})"),
    ("exp2", "tl.exp2({x})"),
    ("expm1", "_expm1({x})", ("_expm1",)),
    ("log", "tl.log({x})"),
    ("log2", "tl.log2({x})"),
    ("log1p", "_log1p({x})", ("_log1p",)),
    ("sqrt", "tl.sqrt_rn({x})"),
    ("rsqrt", "1.0 / tl.sqrt_rn({x})"),
    ("sin", "tl.sin({x})"),
    ("cos", "tl.cos({x})"),
    ("erf", "tl.erf({x})"),
    ("reciprocal", "1.0 / {x}"),
    ("square", "{x} * {x}"),
    ("sign", "tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, 0.0))"),
    ("floor", "tl.floor({x})"),
    ("ceil", "tl.ceil({x})"),
    ("trunc", "tl.where({x} < 0, tl.ceil({x}), tl.floor({x}))"),
    # Round half to even, as torch.round: floor(x + 0.5), stepped back on odd ties.
    ("round", "_round_half_even({x})", ("_round_half_even",)),
    ("logical_not", "{x} == 0"),
    ("leaky_relu", "tl.where({x} > 0, {x}, {x} * {negative_slope})"),
    ("elu", "tl.where({x} > 0, {x}, {alpha} * _expm1({x}))", ("_expm1",)),
    (
        "celu",
        "tl.maximum({x}, 0.0) + tl.minimum(0.0, {alpha} * _expm1({x} / {alpha}))",
        ("_expm1",),
    ),
    ("gelu_none", "0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"),
    (
        "gelu_tanh",
        "0.5 * {x} * (1.0 + _tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))",
        ("_tanh",),
    ),
    (
        "softplus",
        "tl.where({x} * {beta} > {threshold}, {x}, _log1p(tl.exp({x} * {beta})) / {beta})",
        ("_log1p",),
    ),
    ("threshold", "tl.where({x} > {threshold}, {x}, {value})"),
    (
        "softshrink",
        "tl.where({x} > {lambd}, {x} - {lambd}, tl.where({x} < -{lambd}, {x} + {lambd}, 0.0))",
    ),
    ("hardshrink", "tl.where(tl.abs({x}) > {lambd}, {x}, 0.0)"),
    ("cast", "{x}"),
]:
    _unary(_name, _template, tuple(_uses[0]) if _uses else ())

HELPERS["_round_half_even"] = '''@triton.jit
def _round_half_even(x):
    """torch.round: nearest integer, ties to even."""
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(tie & odd, r - 1.0, r)
'''

_BINARY_TEMPLATES = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "div_trunc": "_trunc_div({a}, {b})",
    "div_floor": "tl.floor({a} / {b})",
    "maximum": "tl.maximum({a}, {b})",
    "minimum": "tl.minimum({a}, {b})",
    "fmod": "{a} - {b} * _trunc_div({a}, {b})",
    "remainder": "{a} - {b} * tl.floor({a} / {b})",
    "logical_and": "({a} != 0) & ({b} != 0)",
    "logical_or": "({a} != 0) | ({b} != 0)",
    "eq": "{a} == {b}",
    "ne": "{a} != {b}",
    "lt": "{a} < {b}",
    "le": "{a} <= {b}",
    "gt": "{a} > {b}",
    "ge": "{a} >= {b}",
}
for _name, _template in _BINARY_TEMPLATES.items():
    _uses = ("_trunc_div",) if "_trunc_div" in _template else ()
    pointwise(_name, _uses)(
        lambda a, attrs, t=_template: t.format(a=_paren(a[0].expr), b=_paren(a[1].expr))
    )

HELPERS["_trunc_div"] = '''@triton.jit
def _trunc_div(a, b):
    """a / b rounded toward zero."""
    q = a / b
    return tl.where(q < 0, tl.ceil(q), tl.floor(q))
'''


@pointwise("where")
def _where(a: list[Operand], attrs: dict[str, Any]) -> str:
    return f"tl.where({a[0].expr}, {a[1].expr}, {a[2].expr})"


@pointwise("nan_to_num")
def _nan_to_num(a: list[Operand], attrs: dict[str, Any]) -> str:
    x, nan, posinf, neginf = (o.expr for o in a)
    inf = 'float("inf")'
    return (
        f"tl.where({x} != {x}, {nan}, tl.where({x} == {inf}, {posinf}, "
        f"tl.where({x} == -{inf}, {neginf}, {x})))"
    )


@pointwise("clamp")
def _clamp(a: list[Operand], attrs: dict[str, Any]) -> str:
    x, lo, hi = a
    out = x.expr
    if lo.expr != "None":
        out = f"tl.maximum({out}, {lo.expr})"
    if hi.expr != "None":
        out = f"tl.minimum({out}, {hi.expr})"
    return out


@pointwise("pow")
def _pow(a: list[Operand], attrs: dict[str, Any]) -> str:
    base, exp = a
    if base.is_const:  # c ** x = exp2(x * log2(c))
        return f"tl.exp2({_paren(exp.expr)} * {flt(math.log2(base.const))})"
    if exp.is_const:
        e = float(exp.const)
        if e == 0.5:
            return f"tl.sqrt_rn({base.expr})"
        if e == -0.5:
            return f"1.0 / tl.sqrt_rn({base.expr})"
        if e.is_integer() and abs(e) <= 8:
            n = int(abs(e))
            prod = " * ".join([_paren(base.expr)] * n) if n else "1.0"
            return f"1.0 / ({prod})" if e < 0 else prod
        # Non-integer exponent: negative bases give nan, as in torch.
        return f"tl.exp2({flt(e)} * tl.log2({base.expr}))"
    return f"_pow({base.expr}, {exp.expr})"


USES["pow"] = ("_pow",)
HELPERS["_pow"] = '''@triton.jit
def _pow(x, y):
    """x ** y for float tensors: exp2(y * log2|x|), signed for negative x with odd integer y."""
    mag = tl.exp2(y * tl.log2(tl.abs(x)))
    y_int = tl.floor(y) == y
    y_odd = y_int & ((y - 2.0 * tl.floor(y * 0.5)) != 0.0)
    signed = tl.where(y_odd, -mag, mag)
    return tl.where(x < 0, tl.where(y_int, signed, float("nan")), mag)
'''


def _paren(expr: str) -> str:
    """Parenthesise an expression unless it is a name, a literal, a subscript or a call."""
    if re.fullmatch(r"[\w.]+(\[[^\[\]]*\])?", expr):
        return expr
    simple = expr.replace("_", "").replace(".", "").replace("[", "").replace("]", "")
    if simple.isalnum() or (expr.endswith(")") and _balanced_call(expr)):
        return expr
    return f"({expr})"


def _balanced_call(expr: str) -> bool:
    """True when expr is one call `name(...)` whose outer parentheses match each other."""
    head = expr.split("(", 1)[0]
    if not head.replace("_", "").replace(".", "").isalnum():
        return False
    depth = 0
    for i, ch in enumerate(expr):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and i != len(expr) - 1:
                return False
    return True


def helpers_for(ops: set[str]) -> list[str]:
    """The helper names the given pointwise ops need, dependencies first."""
    needed: list[str] = []

    def add(h: str) -> None:
        for dep in HELPER_DEPS.get(h, ()):
            add(dep)
        if h not in needed:
            needed.append(h)

    for op in sorted(ops):
        for h in USES.get(op, ()):
            add(h)
    return needed


HELPERS["_mul"] = '''@triton.jit
def _mul(a, b):
    """Combine function of a product reduction or scan."""
    return a * b
'''

HELPERS["_same_dense_layout"] = '''def _same_dense_layout(*tensors):
    """True when the tensors share one shape and strides that cover memory densely in some dim
    order (a transposed tensor does): elementwise work can then run in memory order."""
    first = tensors[0]
    if any(t.shape != first.shape or t.stride() != first.stride() for t in tensors):
        return False
    expected = 1
    for size, stride in sorted(zip(first.shape, first.stride()), key=lambda p: p[1]):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True
'''

HELPERS["_transposed_dense"] = '''def _transposed_dense(shape, *tensors):
    """True when the tensors all have `shape`, one set of strides, cover memory densely, and are
    not row-major (a transposed input): a kernel can then walk them in memory order."""
    first = tensors[0]
    return first.shape == shape and not first.is_contiguous() and _same_dense_layout(*tensors)
'''
