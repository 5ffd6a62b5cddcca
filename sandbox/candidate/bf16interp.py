"""bf16 under the Triton interpreter, as the GPU computes it (one of tritoncompat's fixes).

The interpreter stores bf16 as its bit patterns in uint16 arrays and then computes on those
integers: `a + b`, `-a`, comparisons, fma, `tl.sum` and `tl.dot` of bf16 blocks were integer
arithmetic on the bits (a bf16 GEMM came out ~1e10 off, the NumPy product of 16256s), and its
fp32 -> bf16 cast truncated where the GPU rounds to nearest even (triton 3.6-3.8). While a
kernel is interpreted, each of those operations works on the values as fp32 and rounds the
result to bf16 the way the GPU's cvt.rn.bf16.f32 does.
"""

from __future__ import annotations

import math

_MARK = "_kernelwright_bf16"


def bf16_to_f32(bits):
    """The fp32 values of bf16 bit patterns (uint16): exact, a bf16 is an fp32's top half."""
    import numpy as np

    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(values, *, truncate: bool = False):
    """bf16 bit patterns (uint16) of fp32 values, rounded to nearest even (`truncate`: toward
    zero); NaN stays a quiet NaN of the same sign, infinities stay infinite."""
    import numpy as np

    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    if truncate:
        out = bits >> 16
    else:
        out = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    if nan.any():
        out = np.where(nan, (bits >> 16) | 0x40, out)
    return out.astype(np.uint16)


def fix_bf16(interp) -> bool:
    """Wrap the interpreter's builder and reductions for bf16 (idempotent; True once in place)."""
    import numpy as np
    import triton.language as tl

    builder = interp.InterpreterBuilder
    handle = interp.TensorHandle
    if getattr(builder.binary_op, _MARK, False):
        return True
    bf16 = tl.bfloat16

    def is_bf16(h) -> bool:
        return getattr(h, "dtype", None) is not None and h.dtype.scalar == bf16

    def values(h):
        return bf16_to_f32(h.data) if is_bf16(h) else h.data

    def result(out, dtype):
        # A float result of a bf16 operation is a bf16; a comparison's bool stays as it is.
        out = np.asarray(out)
        if dtype.scalar == bf16 and out.dtype != np.bool_:
            return handle(f32_to_bf16(out.astype(np.float32)).reshape(out.shape), bf16)
        return handle(out, dtype.scalar)

    def wrap(name, fn):
        original = getattr(builder, name, None)
        if original is None:  # pragma: no cover - a Triton without that builder method
            return
        patched = fn(original)
        setattr(patched, _MARK, True)
        patched.__wrapped__ = original
        setattr(builder, name, patched)

    def binary(original):
        def binary_op(self, lhs, rhs, op):
            if not (is_bf16(lhs) or is_bf16(rhs)):
                return original(self, lhs, rhs, op)
            return result(op(values(lhs), values(rhs)), lhs.dtype)

        return binary_op

    def ternary(original):
        def ternary_op(self, lhs, rhs, other, op):
            if not (is_bf16(lhs) or is_bf16(rhs) or is_bf16(other)):
                return original(self, lhs, rhs, other, op)
            return result(op(values(lhs), values(rhs), values(other)), other.dtype)

        return ternary_op

    def unary(original):
        def unary_op(self, arg, op):
            if not is_bf16(arg):
                return original(self, arg, op)
            return result(op(values(arg)), arg.dtype)

        return unary_op

    def elementwise(f):
        # Methods that read `.data` themselves rather than going through unary/ternary_op.
        def make(original):
            def call(self, *args):
                if not any(is_bf16(a) for a in args):
                    return original(self, *args)
                return result(f(*(values(a) for a in args)), args[-1].dtype)

            return call

        return make

    def cast(original):
        def cast_impl(self, src, dst_type):
            dst = dst_type.scalar
            if not (is_bf16(src) or dst == bf16):
                return original(self, src, dst_type)
            data = values(src)
            if dst == bf16:
                return handle(f32_to_bf16(data.astype(np.float32)).reshape(data.shape), bf16)
            return handle(data.astype(interp._get_np_dtype(dst)), dst)

        return cast_impl

    def fp_to_fp(original):
        def create_fp_to_fp(self, src, dst_type, rounding_mode):
            dst = dst_type.scalar
            if not (is_bf16(src) or dst == bf16) or src.dtype.primitive_bitwidth == 8:
                return original(self, src, dst_type, rounding_mode)
            if dst.primitive_bitwidth == 8:
                return original(self, self.cast_impl(src, tl.float32), dst_type, rounding_mode)
            data = values(src)
            if dst == bf16:
                rtz = rounding_mode is not None and "RTZ" in str(rounding_mode)
                bits = f32_to_bf16(data.astype(np.float32), truncate=rtz)
                return handle(bits.reshape(data.shape), bf16)
            return handle(data.astype(interp._get_np_dtype(dst)), dst)

        return create_fp_to_fp

    def dot(original):
        def create_dot(self, a, b, d, *rest):
            if not (is_bf16(a) or is_bf16(b)):
                return original(self, a, b, d, *rest)
            if is_bf16(d):  # pragma: no cover - tl.dot's accumulator is fp32 or fp16
                d = self.cast_impl(d, tl.float32)
            wide = [handle(bf16_to_f32(h.data), tl.float32) if is_bf16(h) else h for h in (a, b)]
            return original(self, wide[0], wide[1], d, *rest)

        return create_dot

    wrap("binary_op", binary)
    wrap("ternary_op", ternary)
    wrap("unary_op", unary)
    wrap("create_fma", elementwise(lambda x, y, z: x * y + z))
    wrap("create_rsqrt", elementwise(lambda x: 1 / np.sqrt(x)))
    wrap("create_erf", elementwise(np.vectorize(math.erf, otypes=[np.float32])))
    wrap("cast_impl", cast)
    wrap("create_fp_to_fp", fp_to_fp)
    wrap("create_dot", dot)
    # The lambdas the builder's class bound at definition (create_fadd = lambda ...: self.binary_op)
    # look `binary_op` up on the instance, so they see the wrapped one. A bf16 constant:
    if not hasattr(builder, "get_bf16"):
        builder.get_bf16 = lambda self, value: handle(f32_to_bf16(np.array([value])), bf16)

    _fix_bf16_reductions(interp, is_bf16)
    return True


def _fix_bf16_reductions(interp, is_bf16) -> None:
    """tl.sum, tl.max/min (with their indices) and tl.cumsum/cumprod of bf16 blocks run NumPy's
    reductions on the bit patterns; they reduce the values in fp32 and round once to bf16."""
    import numpy as np
    import triton.language as tl

    def as_f32_tensor(t):
        h = t.handle
        if not is_bf16(h):
            return t, False
        return tl.core.tensor(interp.TensorHandle(bf16_to_f32(h.data), tl.float32), _f32(t)), True

    def _f32(t):
        return tl.block_type(tl.float32, list(t.shape)) if t.type.is_block() else tl.float32

    def back(ret):
        if isinstance(ret, (list, tuple)):
            return type(ret)(back(r) for r in ret)
        h = ret.handle
        if h.dtype.scalar != tl.float32:
            return ret  # an index
        bits = f32_to_bf16(h.data).reshape(np.shape(h.data))
        ty = tl.block_type(tl.bfloat16, list(ret.shape)) if ret.type.is_block() else tl.bfloat16
        return tl.core.tensor(interp.TensorHandle(bits, tl.bfloat16), ty)

    def wrap(cls, name):
        original = getattr(cls, name, None)
        if original is None or getattr(original, _MARK, False):
            return

        def call(self, input, *args, **kwargs):
            first = input[0] if isinstance(input, tuple) else input
            wide, was = as_f32_tensor(first)
            if not was:
                return original(self, input, *args, **kwargs)
            arg = (wide, *input[1:]) if isinstance(input, tuple) else wide
            return back(original(self, arg, *args, **kwargs))

        setattr(call, _MARK, True)
        call.__wrapped__ = original
        setattr(cls, name, call)

    for name in ("sum", "min_max"):
        wrap(interp.ReduceOps, name)
    for name in ("cumsum", "cumprod"):
        wrap(interp.ScanOps, name)
