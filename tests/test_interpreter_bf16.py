"""bf16 under the Triton interpreter computes what the GPU does (candidate/bf16interp.py).

The stock interpreter keeps bf16 as bit patterns in uint16 arrays and did integer arithmetic on
them (`a + b`, `-a`, `tl.sum`, `tl.dot`: a bf16 GEMM came out ~1e10 off), and truncated fp32 ->
bf16. Every offline bf16 kernel with a `tl.dot` was refused on CPU for it (52 of levels 1-2).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_interpreter_kernels import interpreted_report

from kernelwright.sandbox.candidate.bf16interp import bf16_to_f32, f32_to_bf16


def _torch_bits(x: torch.Tensor) -> np.ndarray:
    return x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def test_rounding_to_bf16_is_torchs_round_to_nearest_even():
    special = [2.0409, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -(1.0 + 2**-8), 3.3895e38, 1e-40, -0.0]
    values = torch.cat(
        [
            torch.randn(4096) * 10.0 ** torch.randint(-30, 30, (4096,)),
            torch.tensor([*special, float("inf"), float("-inf")]),
        ]
    )
    got = f32_to_bf16(values.numpy())
    assert np.array_equal(got, _torch_bits(values))
    assert np.array_equal(bf16_to_f32(got), values.to(torch.bfloat16).float().numpy())
    # NaN stays NaN (torch gives a quiet NaN too); truncation is toward zero.
    assert np.isnan(bf16_to_f32(f32_to_bf16(np.array([np.nan], np.float32))))[0]
    assert bf16_to_f32(f32_to_bf16(np.array([2.0409], np.float32), truncate=True))[0] == 2.03125


SCRIPT = r"""
import json
import torch
import triton
import triton.language as tl
from kernelwright.sandbox.candidate import tritoncompat

applied = tritoncompat.fix_interpreter()

@triton.jit
def ops(a_ptr, b_ptr, o_ptr, OP: tl.constexpr):
    r = tl.arange(0, 16)
    offs = r[:, None] * 16 + r[None, :]
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    if OP == 0:
        o = a + b
    elif OP == 1:
        o = a * b - a
    elif OP == 2:
        o = -a
    elif OP == 3:
        o = tl.where(a < b, a, b)
    elif OP == 4:
        o = a + 1.5
    elif OP == 5:
        o = (a.to(tl.float32) * 1.3).to(tl.bfloat16)
    elif OP == 6:
        o = tl.sum(a, axis=1)[:, None] + tl.zeros_like(a)
    elif OP == 7:
        o = tl.max(a, axis=1)[:, None] + tl.zeros_like(a)
    elif OP == 8:
        o = tl.dot(a, b).to(tl.bfloat16)
    elif OP == 9:
        o = tl.cumsum(a, axis=1)
    else:
        o = tl.fma(a, b, a)
    tl.store(o_ptr + offs, o)

g = torch.Generator().manual_seed(0)
a = torch.randn(16, 16, generator=g).bfloat16()
b = torch.randn(16, 16, generator=g).bfloat16()
expected = {
    0: a + b, 1: a * b - a, 2: -a, 3: torch.where(a < b, a, b), 4: a + 1.5,
    5: (a.float() * 1.3).bfloat16(), 6: a.float().sum(1, keepdim=True).expand(16, 16),
    7: a.max(1, keepdim=True).values.expand(16, 16), 8: a.float() @ b.float(),
    9: a.float().cumsum(1), 10: a.float() * b.float() + a.float(),
}
errors = {}
for op, want in expected.items():
    out = torch.empty(16, 16, dtype=torch.bfloat16)
    ops[(1,)](a, b, out, OP=op)
    want = want.double()
    errors[op] = ((out.double() - want).abs().max() / want.abs().max()).item()
x = torch.tensor([2.0409])
y = torch.empty(1, dtype=torch.bfloat16)

@triton.jit
def store(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr))

store[(1,)](x, y)
print(json.dumps({"applied": applied, "errors": errors, "stored": y.item()}))
"""


def test_bf16_operations_in_a_kernel_are_the_gpus(tmp_path):
    report = interpreted_report(tmp_path, "bf16_ops.py", SCRIPT)
    assert "bf16" in report["applied"]
    assert report["stored"] == 2.046875  # rounded to nearest, as torch and the GPU do
    # 0-5: one bf16 rounding of the exact result, as torch's; 6-10: an fp32 sum rounded once.
    exact = {k: v for k, v in report["errors"].items() if int(k) <= 5}
    assert exact == {k: 0.0 for k in exact}, report["errors"]
    assert all(v <= 2.0**-8 for v in report["errors"].values()), report["errors"]


# Each kernel's products are 16-bit `tl.dot`s: a GEMM with its epilogue, the implicit-GEMM
# convolution (CONV_IMPL 1), flash attention and the recurrent cell.
@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's bf16 tl.dot")
@pytest.mark.parametrize(
    "name, constants",
    [
        ("linear_gelu", {}),
        ("conv_strided_groups", {"CONV_IMPL": 1}),
        ("causal_attention", {}),
        ("recurrent", {}),
    ],
)
def test_bf16_tensor_core_kernels_of_the_offline_coder_are_accepted(name, constants):
    from test_codegen_harness import task_path

    from kernelwright.codegen import generate
    from kernelwright.codegen.tunables import with_values
    from kernelwright.sandbox import EvalConfig, evaluate

    path = task_path(name)
    fused = generate(path, dtype="bf16")
    assert fused.source is not None, fused.reason
    assert set(constants) <= set(fused.tunables), fused.tunables
    source = with_values(fused.source, constants)
    config = EvalConfig(dtype="bf16", timing=False, compile_baseline=False)
    result = evaluate(path, source, config)
    assert result.status == "ok", result.summary()
