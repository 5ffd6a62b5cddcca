"""Template: a convolution (nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d) as an implicit GEMM with
its pointwise epilogue (bias, activation, scale, clamp, residual) applied before the one store.

The GEMM: M = output pixels (batch x spatial), N = output channels of one group, K = input
channels of the group x kernel taps, one grid column per group. The im2col matrix is never
materialised: each K step computes, for its (pixel, channel, tap) entries, the input coordinate
(o * stride - padding + tap * dilation) and loads it with a mask for padding and borders. A
transposed convolution is the same GEMM in its gather form: output pixel o takes input i where
i * stride - padding + tap * dilation == o, so the mask also drops taps that do not divide by the
stride (1/stride^rank of them are real: the price of one kernel for both). One template serves
every spatial rank: the launcher views a 2D (1D) convolution as a 3D one of depth (and height) 1.

Products: tl.dot with kernel_matmul's precision rule (exact fp32 or tf32x3, tensor cores for
fp16/bf16, fp32 accumulation). A group with fewer than 16 output channels or a reduction shorter
than 16 (depthwise: N = 1, K = 9 for 3x3) cannot fill a 16x16 tensor-core tile (a dot would spend
up to 28x its useful multiply-adds): it multiplies on the CUDA cores, fp32 outer products, instead
of a separate direct kernel, so one template keeps one index computation.

CONV_IMPL (tunables.py) switches the launcher to torch's convolution (cuDNN) with the epilogue as
one pointwise kernel, so the tester's sweep measures both in the same file and keeps the faster.
Not yet timed on the H200 (2026-12-02: no device time): torch's is the default until it is.
"""

from __future__ import annotations

from functools import partial

from .body import load_cast
from .group_writer import Emitted, GroupWriter
from .ir import PW, Node
from .kernel_matmul import precision_lines
from .kernel_pointwise import write_pointwise
from .partition import POINTWISE, Group
from .pysrc import call, docstring
from .template import render
from .unsupported import Unsupported

_KERNEL = """
@triton.jit
$signature
    $doc
    pid = tl.program_id(0)
    group = tl.program_id(1)
    # Consecutive programs share a row of pixels (the larger operand) across channel tiles.
    num_pid_n = tl.cdiv(C_out_g, BLOCK_N)
    rm = (pid // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    if WIDE:  # tensors past 2**31 elements need 64-bit offsets
        rm = rm.to(tl.int64)
    row_ok = rm < M
    col_ok = rn < C_out_g
    chan = group * C_out_g + rn  # output channel
    # Each row's output pixel (n, od, oh, ow), in the output's row-major order.
    pix_w = rm % OW
    pix_h = (rm // OW) % OH
    pix_d = (rm // (OW * OH)) % OD
    pix_n = rm // (OW * OH * OD)
    image_rows = image_ptr + pix_n * sxn + group * C_in_g * sxc
    taps = KD * KH * KW
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        # K runs over (input channel, kd, kh, kw): the weight's own order.
        kk = k_start + rk
        k_ok = kk < K
        ci = kk // taps
        tap = kk % taps
        kd = tap // (KH * KW)
        kh = (tap // KW) % KH
        kw = tap % KW
        if TRANSPOSED:
            # Gather form: input i reaches output o when i * stride - pad + k * dil == o.
            td = pix_d[:, None] + pad_d - kd[None, :] * dil_d
            th = pix_h[:, None] + pad_h - kh[None, :] * dil_h
            tw = pix_w[:, None] + pad_w - kw[None, :] * dil_w
            in_d = td // stride_d
            in_h = th // stride_h
            in_w = tw // stride_w
            ok_d = (td >= 0) & (td % stride_d == 0) & (in_d < ID)
            ok_h = (th >= 0) & (th % stride_h == 0) & (in_h < IH)
            ok_w = (tw >= 0) & (tw % stride_w == 0) & (in_w < IW)
            # weight (C_in, C_out / groups, KD, KH, KW)
            w_offs = ((group * C_in_g + ci) * C_out_g * taps + tap)[:, None] + rn[None, :] * taps
        else:
            in_d = pix_d[:, None] * stride_d - pad_d + kd[None, :] * dil_d
            in_h = pix_h[:, None] * stride_h - pad_h + kh[None, :] * dil_h
            in_w = pix_w[:, None] * stride_w - pad_w + kw[None, :] * dil_w
            ok_d = (in_d >= 0) & (in_d < ID)
            ok_h = (in_h >= 0) & (in_h < IH)
            ok_w = (in_w >= 0) & (in_w < IW)
            # weight (C_out, C_in / groups, KD, KH, KW): K contiguous per output channel
            w_offs = kk[:, None] + chan[None, :] * K
        # Padding, borders and strides that skip an input are masked to zero: no im2col copy.
        a_mask = row_ok[:, None] & k_ok[None, :] & ok_d & ok_h & ok_w
        a_offs = ci[None, :] * sxc + in_d * sxd + in_h * sxh + in_w * sxw
        a = tl.load(image_rows[:, None] + a_offs, mask=a_mask, other=0.0)
        b = tl.load(filter_ptr + w_offs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        if DOT:
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        else:  # too few channels or taps for a tensor-core tile: fp32 outer products
            prod = a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :]
            acc += tl.sum(prod, axis=1)
    mask = row_ok[:, None] & col_ok[None, :]
    if WIDE:
        chan = chan.to(tl.int64)
    pixels = OD * OH * OW
    offs = (pix_n * C_out * pixels + rm % pixels)[:, None] + chan[None, :] * pixels
    $product
    $epilogue
    $stores
"""

_TORCH_PATH = """
if CONV_IMPL == 0:
    # torch's convolution (cuDNN), then the epilogue in one pointwise pass.
    $conv
    $epilogue
    return $outs
"""

_LAUNCHER = """
$signature
    $doc
    $torch_path
    $precision
    # Written for 3 spatial dims: a lower-rank convolution is one of depth (and height) 1.
    image = $image
    filters = $filters
    groups = $groups
    stride = $stride
    pad = $padding
    dil = $dilation
    $geometry
    out_shape = (image.shape[0], c_out, *spatial[$missing:])
    $outputs
    $epilogue_views
    M = image.shape[0] * spatial[0] * spatial[1] * spatial[2]
    K = c_in_g * filters.shape[2] * filters.shape[3] * filters.shape[4]
    # Tensor cores need 16x16 tiles; fewer channels per group or taps: CUDA-core products.
    dot = c_out_g >= 16 and K >= 16
    block_n = CONV_BLOCK_N if dot else min(triton.next_power_of_2(c_out_g), 16)
    block_k = CONV_BLOCK_K if dot else min(triton.next_power_of_2(K), 16)
    grid = (triton.cdiv(M, CONV_BLOCK_M) * triton.cdiv(c_out_g, block_n), groups)
    $launch
    return $outs
"""

_FORWARD_GEOMETRY = """
c_in_g, c_out = filters.shape[1], filters.shape[0]
c_out_g = c_out // groups
spatial = [
    (i + 2 * p - d * (k - 1) - 1) // s + 1
    for i, k, s, p, d in zip(image.shape[2:], filters.shape[2:], stride, pad, dil)
]
"""

_TRANSPOSED_GEOMETRY = """
c_in_g, c_out_g = image.shape[1] // groups, filters.shape[1]
c_out = c_out_g * groups
extra = $output_padding
spatial = [
    (i - 1) * s - 2 * p + d * (k - 1) + e + 1
    for i, k, s, p, d, e in zip(image.shape[2:], filters.shape[2:], stride, pad, dil, extra)
]
"""

_CONSTANTS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "PRECISION", "DOT", "TRANSPOSED", "WIDE"]
_GEOMETRY_PARAMS = [f"{what}_{d}" for what in ("stride", "pad", "dil") for d in "dhw"]
_SIZES = ["ID", "IH", "IW", "OD", "OH", "OW", "KD", "KH", "KW"]
# File order is sweep order: CONV_IMPL first, so cuDNN and both Triton products are measured in
# the sweep's first trials whatever its budget.
_TUNABLES = [
    "CONV_IMPL",
    "CONV_BLOCK_M",
    "CONV_BLOCK_N",
    "CONV_BLOCK_K",
    "CONV_WARPS",
    "CONV_STAGES",
]


def write_conv(w: GroupWriter) -> Emitted:
    g = w.g
    conv = next(n for n in g.nodes if n.kind == "conv")
    if conv.op in ("maxpool", "avgpool"):  # the same node kind: a window per output element
        from .kernel_pool import write_pool

        return write_pool(w)
    if g.stores:
        raise Unsupported(f"{conv.name}: an in-place store in a convolution's epilogue")
    x, weight, bias, *geometry = conv.args
    transposed, rank = conv.attrs["transposed"], conv.attrs["rank"]
    epi_inputs = [t for t in w.tensors if _used_in_epilogue(t, g)]
    epi_scalars = [s for s in w.scalars if s not in geometry]
    outs = g.outputs
    summary = w.summary()
    has_bias = bias is not None

    params = (
        ["image_ptr", "filter_ptr"]
        + (["filter_bias_ptr"] if has_bias else [])
        + [f"{t.name}_ptr" for t in epi_inputs]
        + [f"{o.name}_ptr" for o in outs]
        + ["M", "K", "C_in_g", "C_out_g", "C_out", *_SIZES, *_GEOMETRY_PARAMS]
        + ["sxn", "sxc", "sxd", "sxh", "sxw"]
        + [f"{t.name}_s{i}" for t in epi_inputs for i in range(5)]
        + [s.name for s in epi_scalars]
        + [f"{c}: tl.constexpr" for c in _CONSTANTS]
    )
    product = [f"{conv.name} = acc"]
    if has_bias:
        product = [
            "filter_bias = tl.load(filter_bias_ptr + chan, mask=col_ok, other=0.0)",
            f"{conv.name} = acc + filter_bias.to(tl.float32)[None, :]",
        ]
    loads = []
    for t in epi_inputs:
        row = f"pix_n * {t.name}_s0 + pix_d * {t.name}_s2 + pix_h * {t.name}_s3"
        row += f" + pix_w * {t.name}_s4"
        off = f"({row})[:, None] + chan[None, :] * {t.name}_s1"
        loads.append(f"{t.name} = tl.load({t.name}_ptr + {off}, mask=mask){load_cast(t)}")
    kind = "transposed convolution" if transposed else "convolution"
    kernel = render(
        _KERNEL,
        signature=call(f"def {w.kernel}", params, "", ":"),
        doc=partial(
            docstring,
            f"{summary}: a {rank}D {kind} as an implicit GEMM, one (BLOCK_M pixels, BLOCK_N "
            "channels) output tile per program.",
        ),
        product=product,
        epilogue=loads + [w.pointwise_line(n, "") for n in g.nodes if n.kind == PW],
        stores=[f"tl.store({o.name}_ptr + offs, {o.name}, mask=mask)" for o in outs],
    )

    missing = str(3 - rank)
    unsqueeze = ".unsqueeze(2)" * (3 - rank)
    names = dict(zip(("stride", "padding", "dilation", "groups", "output_padding"), geometry))
    dev = f"{x.name}.device"
    views = []
    for t in epi_inputs:
        views.append(f"{t.name}_5d = {t.name}.expand(out_shape){unsqueeze}")
    wide_terms = " or ".join(
        ["image.numel() >= 2**31"] + [f"{o.name}.numel() >= 2**31" for o in outs]
    )
    launch = (
        ["image", "filters"]
        + ([bias.name] if has_bias else [])
        + [f"{t.name}_5d" for t in epi_inputs]
        + [o.name for o in outs]
        + ["M", "K", "c_in_g", "c_out_g", "c_out"]
        + ["*image.shape[2:]", "*spatial", "*filters.shape[2:]", "*stride", "*pad", "*dil"]
        + ["*image.stride()"]
        + [f"*{t.name}_5d.stride()" for t in epi_inputs]
        + [s.name for s in epi_scalars]
        + ["BLOCK_M=CONV_BLOCK_M", "BLOCK_N=block_n", "BLOCK_K=block_k"]
        + ["PRECISION=precision", "DOT=dot", f"TRANSPOSED={transposed}"]
        + [f"WIDE={wide_terms}", "num_warps=CONV_WARPS", "num_stages=CONV_STAGES"]
    )
    torch_path, epilogue_blocks, helpers = _torch_path(w, conv, transposed, rank, names)
    geometry_lines = render(
        _TRANSPOSED_GEOMETRY if transposed else _FORWARD_GEOMETRY,
        missing=missing,
        output_padding=_lead(names["output_padding"].name, 0, rank) if transposed else "",
    )
    launcher = render(
        _LAUNCHER,
        signature=call(
            f"def {w.launcher}", [t.name for t in w.tensors] + [s.name for s in w.scalars], "", ":"
        ),
        doc=partial(docstring, f"{summary}."),
        torch_path=torch_path,
        precision=precision_lines("CONV_IMPL == 2", x.name),
        image=f"{x.name}{unsqueeze}",
        filters=f"{weight.name}.contiguous(){unsqueeze}",
        groups=names["groups"].name,
        missing=missing,
        stride=_lead(names["stride"].name, 1, rank),
        padding=_lead(names["padding"].name, 0, rank),
        dilation=_lead(names["dilation"].name, 1, rank),
        geometry=geometry_lines,
        outputs=[
            f"{o.name} = torch.empty(out_shape, dtype={w.dtype_expr(o)}, device={dev})"
            for o in outs
        ],
        epilogue_views=views,
        launch=partial(call, f"{w.kernel}[grid]", launch),
        outs=", ".join(o.name for o in outs),
    )
    return Emitted(
        w.launcher,
        [kernel, *epilogue_blocks.blocks, launcher] if epilogue_blocks else [kernel, launcher],
        set(w.body.helpers) | helpers,
        _TUNABLES + (epilogue_blocks.tunables if epilogue_blocks else []),
        f"{kind}: {summary}",
        list(outs),
    )


def _torch_path(
    w: GroupWriter, conv: Node, transposed: bool, rank: int, names: dict[str, Node]
) -> tuple[list[str], Emitted | None, set[str]]:
    """The launcher's CONV_IMPL == 0 branch: F.conv{rank}d (F.conv_transpose{rank}d), then the
    group's pointwise ops as one pointwise kernel (kernel_pointwise) when there are any; none
    when the group is the forward's only kernel work and has no pointwise ops."""
    x, weight, bias = conv.args[:3]
    geo = [names[k].name for k in ("stride", "padding")]
    if transposed:
        geo += [names["output_padding"].name, names["groups"].name, names["dilation"].name]
        fn = f"F.conv_transpose{rank}d"
    else:
        geo += [names["dilation"].name, names["groups"].name]
        fn = f"F.conv{rank}d"
    conv_call = call(
        f"{conv.name} = {fn}", [x.name, weight.name, bias.name if bias else "None", *geo], ""
    )
    outs = ", ".join(o.name for o in w.g.outputs)
    pointwise = [n for n in w.g.nodes if n.kind == PW]
    if not pointwise and w.alone:
        # The forward's only work: its torch path would be eager itself, which the baseline
        # times already (and the evaluator refuses a forward that launches no kernel). Triton
        # only; CONV_IMPL 0 then multiplies like 1.
        return [], None, set()
    if not pointwise:
        return render(_TORCH_PATH, conv=conv_call, epilogue=[], outs=outs), None, set()
    sub = _epilogue_group(w.g, conv, pointwise)
    e = write_pointwise(GroupWriter(sub, f"{w.title}_epilogue", w.dtype))
    args = [t.name for t in sub.inputs if t.kind != "scalar"]
    args += [t.name for t in sub.inputs if t.kind == "scalar"]
    targets = ", ".join(o.name for o in e.outputs)
    epilogue = call(f"{targets} = {e.launcher}", args, "")
    return render(_TORCH_PATH, conv=conv_call, epilogue=epilogue, outs=outs), e, e.helpers


def _epilogue_group(g: Group, conv: Node, pointwise: list[Node]) -> Group:
    """The group's pointwise ops as a pointwise group over torch's convolution output."""
    sub = Group(POINTWISE, list(pointwise), domain=conv.shape)
    members = sub.members()
    for n in pointwise:
        for a in n.tensor_args():
            if id(a) not in members and a not in sub.inputs:
                sub.inputs.append(a)
    sub.outputs = [o for o in g.outputs if o is not conv]
    return sub


def _lead(name: str, value: int, rank: int) -> str:
    """Python for the 3-dim tuple of a `rank`-dim geometry tuple: `value` for the dims it lacks."""
    if rank == 3:
        return f"tuple({name})"
    return "(" + f"{value}, " * (3 - rank) + f"*{name})"


def _used_in_epilogue(t: Node, g: Group) -> bool:
    return any(n.kind == PW and t in n.tensor_args() for n in g.nodes)
