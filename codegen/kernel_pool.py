"""Template: a max or average pooling (nn.MaxPool1d/2d/3d, nn.AvgPool1d/2d/3d) as a Triton kernel,
one output element per lane: the window's taps are loaded with a mask for padding and borders
and reduced in fp32.

The geometry (kernel size, stride, padding, dilation, ceil_mode, count_include_pad) is read from
the module at run time, as a convolution's is (normalize_conv.py), so a task that passes it to
its constructor gets a candidate right for any value of it. One template serves every spatial
rank: the launcher views a 1D (2D) pooling as a 3D one of depth (and height) 1. The output size
and the average's divisor follow torch's rules: with ceil_mode a last window must start inside
the input or the left padding; the divisor counts the window's taps inside the padded input
(count_include_pad) or inside the input itself.

Only where pooling is the forward's whole work (api.py: the graph is normalised again with
`pools` when nothing else is fused); elsewhere pooling stays torch's (cuDNN), not yet timed
against this kernel.
"""

from __future__ import annotations

from functools import partial

from . import ops
from .group_writer import Emitted, GroupWriter
from .pysrc import call, docstring
from .template import render
from .unsupported import Unsupported

_KERNEL = """
@triton.jit
$signature
    $doc
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if WIDE:  # tensors past 2**31 elements need 64-bit offsets
        offs = offs.to(tl.int64)
    mask = offs < TOTAL
    # Each lane's output element (n, c, od, oh, ow), in the output's row-major order.
    ow = offs % OW
    oh = (offs // OW) % OH
    od = (offs // (OW * OH)) % OD
    nc = offs // (OW * OH * OD)
    base = image_ptr + (nc // C) * sxn + (nc % C) * sxc
    start_d = od * stride_d - pad_d
    start_h = oh * stride_h - pad_h
    start_w = ow * stride_w - pad_w
    $init
    for kd in range(KD):
        in_d = start_d + kd * dil_d
        ok_d = mask & (in_d >= 0) & (in_d < ID)
        for kh in range(KH):
            in_h = start_h + kh * dil_h
            ok_h = ok_d & (in_h >= 0) & (in_h < IH)
            for kw in range(KW):
                in_w = start_w + kw * dil_w
                ok = ok_h & (in_w >= 0) & (in_w < IW)
                ptrs = base + in_d * sxd + in_h * sxh + in_w * sxw
                $tap
    $result
    tl.store(out_ptr + offs, $name, mask=mask)
"""

_MAX_INIT = "acc = tl.full((BLOCK,), float('-inf'), tl.float32)"
# torch's max pooling propagates NaN: a NaN tap makes the window's result NaN.
_MAX_TAP = """
value = tl.load(ptrs, mask=ok, other=float("-inf")).to(tl.float32)
acc = tl.maximum(acc, value, propagate_nan=tl.PropagateNan.ALL)
"""
_AVG_INIT = "acc = tl.zeros((BLOCK,), tl.float32)"
_AVG_TAP = "acc += tl.load(ptrs, mask=ok, other=0.0).to(tl.float32)"
# The divisor: per dimension, the taps of the window inside the padded input (count_include_pad)
# or inside the input, as torch computes them (the window is clipped at input + padding first).
_AVG_RESULT = """
end_d = tl.minimum(start_d + KD, ID + pad_d)
end_h = tl.minimum(start_h + KH, IH + pad_h)
end_w = tl.minimum(start_w + KW, IW + pad_w)
if INCLUDE_PAD:
    count = (end_d - start_d) * (end_h - start_h) * (end_w - start_w)
else:
    in_d = tl.minimum(end_d, ID) - tl.maximum(start_d, 0)
    in_h = tl.minimum(end_h, IH) - tl.maximum(start_h, 0)
    in_w = tl.minimum(end_w, IW) - tl.maximum(start_w, 0)
    count = in_d * in_h * in_w
$name = acc / tl.maximum(count, 1).to(tl.float32)
"""

_LAUNCHER = """
$signature
    $doc
    # Written for 3 spatial dims: a lower-rank pooling is one of depth (and height) 1.
    image = $image
    kernel = _pool_dims($kernel_size, $rank, 1)
    stride = _pool_dims($stride, $rank, 1)
    pad = _pool_dims($padding, $rank, 0)
    dil = $dilation
    spatial = [
        _pool_size(i, k, s, p, d, bool($ceil_mode))
        for i, k, s, p, d in zip(image.shape[2:], kernel, stride, pad, dil)
    ]
    out_shape = (image.shape[0], image.shape[1], *spatial[$missing:])
    out = torch.empty(out_shape, dtype=$dtype, device=image.device)
    total = out.numel()
    grid = (triton.cdiv(total, POOL_BLOCK),)
    $launch
    return out
"""

# The output size along one dimension, torch's rule (aten's pooling_output_shape): a helper of
# the file, written once however many poolings use it.
ops.HELPERS["_pool_size"] = '''def _pool_size(size, kernel, stride, pad, dilation, ceil_mode):
    """A pooling's output size along one dimension, as torch computes it."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1  # the last window must start inside the input or the left padding
    return out
'''
ops.HELPERS["_pool_dims"] = '''def _pool_dims(value, rank, lead):
    """A pooling module's int or tuple geometry as 3 dims, `lead` for those a rank lacks."""
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,) * rank
    return (lead,) * (3 - rank) + dims
'''

_TUNABLES = ["POOL_BLOCK", "POOL_WARPS"]


def write_pool(w: GroupWriter) -> Emitted:
    g = w.g
    pool = next(n for n in g.nodes if n.kind == "conv")
    if len(g.nodes) != 1 or g.stores:
        raise Unsupported(f"{pool.name}: pooling with ops fused after it")
    x, *geometry = pool.args
    maximum, rank = pool.op == "maxpool", pool.attrs["rank"]
    names = (
        ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
        if maximum
        else ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")
    )
    geo = {k: n.name for k, n in zip(names, geometry, strict=True)}
    summary = w.summary()
    kind = "max pooling" if maximum else "average pooling"
    params = [
        "image_ptr",
        "out_ptr",
        "TOTAL",
        "C",
        *("ID", "IH", "IW", "OD", "OH", "OW"),
        *(f"{what}_{d}" for what in ("stride", "pad", "dil") for d in "dhw"),
        *("sxn", "sxc", "sxd", "sxh", "sxw"),
        *(f"{c}: tl.constexpr" for c in ("KD", "KH", "KW", "BLOCK", "INCLUDE_PAD", "WIDE")),
    ]
    kernel = render(
        _KERNEL,
        signature=call(f"def {w.kernel}", params, "", ":"),
        doc=partial(
            docstring,
            f"{summary}: a {rank}D {kind}, one output element per lane, BLOCK per program.",
        ),
        init=[_MAX_INIT if maximum else _AVG_INIT],
        tap=(_MAX_TAP if maximum else _AVG_TAP).strip().splitlines(),
        result=[f"{pool.name} = acc"] if maximum else render(_AVG_RESULT, name=pool.name),
        name=pool.name,
    )
    missing = str(3 - rank)
    unsqueeze = ".unsqueeze(2)" * (3 - rank)
    launch = [
        "image",
        "out",
        "total",
        "image.shape[1]",
        "*image.shape[2:]",
        "*spatial",
        "*stride",
        "*pad",
        "*dil",
        "*image.stride()",
        "*kernel",
        "BLOCK=POOL_BLOCK",
        "INCLUDE_PAD=" + ("False" if maximum else f"bool({geo['count_include_pad']})"),
        "WIDE=image.numel() >= 2**31 or total >= 2**31",
        "num_warps=POOL_WARPS",
    ]
    launcher = render(
        _LAUNCHER,
        signature=call(
            f"def {w.launcher}", [t.name for t in w.tensors] + [s.name for s in w.scalars], "", ":"
        ),
        doc=partial(docstring, f"{summary}."),
        image=f"{x.name}{unsqueeze}",
        kernel_size=geo["kernel_size"],
        stride=geo["stride"],  # the module holds kernel_size where it was given None
        padding=geo["padding"],
        rank=str(rank),
        dilation=f"_pool_dims({geo['dilation']}, {rank}, 1)" if maximum else "(1, 1, 1)",
        ceil_mode=geo["ceil_mode"],
        missing=missing,
        dtype=w.dtype_expr(pool),
        launch=partial(call, f"{w.kernel}[grid]", launch),
    )
    return Emitted(
        w.launcher,
        [kernel, launcher],
        set(w.body.helpers) | {"_pool_size", "_pool_dims"},
        _TUNABLES,
        f"{kind}: {summary}",
        [pool],
    )
