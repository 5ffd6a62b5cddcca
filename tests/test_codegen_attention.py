"""Attention: scaled_dot_product_attention becomes one flash-attention kernel (causal, masked),
and so does attention written out by hand (KernelBench level 3's form: q @ k^T, a scale, a
causal mask sliced from a buffer, softmax, @ v); each candidate right at two shapes."""

from __future__ import annotations

import pytest
import torch
from test_codegen_harness import DEVICE, ROOT, TASKS, candidate_module, check_equal, check_ruff

from kernelwright.codegen import generate
from kernelwright.sandbox.task import load_task, task_namespace

TASK = TASKS / "fusion_causal_attention.py"


@pytest.fixture(scope="module")
def candidate():
    result = generate(str(TASK))
    assert result.ok, result.reason
    return result


def test_attention_written_out_by_hand_becomes_the_flash_kernel(candidate):
    assert "attention: flash (full)" in candidate.reason
    src = candidate.source
    call = "_attention(\n            transpose_1, transpose, transpose_2, scale=truediv, drop_mask="
    assert call in src
    assert "self.bias[:, :, :getitem_1, :getitem_1]" in src  # T read at run time
    assert "split(attr_n_embd" in src and "// attr_n_head" in src  # attributes, not literals


def test_causal_attention_is_right_at_two_shapes(tmp_path):
    other = {"batch_size": 3, "seq_len": 13, "n_embd": 30, "n_head": 5, "max_seqlen": 20}
    check_equal("causal_attention", tmp_path, [{}, other])


SDPA = {
    "causal": (ROOT / "benchmarks" / "level1" / "43_sdpa_causal.py", "attention: flash (causal)"),
    "masked": (TASKS / "fusion_sdpa_masked.py", "attention: flash (full, masked)"),
}
SDPA_SHAPES = {
    "causal": [
        {"batch_size": 1, "num_heads": 2, "seq_len": 48, "head_dim": 128},
        {"batch_size": 2, "num_heads": 1, "seq_len": 37, "head_dim": 40},
    ],
    "masked": [{}, {"batch_size": 1, "num_heads": 2, "seq_q": 23, "seq_k": 70, "head_dim": 72}],
}


@pytest.mark.parametrize("name", sorted(SDPA))
def test_sdpa_is_one_flash_kernel_right_at_two_shapes(tmp_path, name):
    path, summary = SDPA[name]
    result = generate(str(path))
    assert result.ok and result.reason == f"1 fused group(s): {summary}", result.reason
    assert "_attention(" in result.source and "scaled_dot_product_attention(" not in result.source
    check_ruff(result.source, tmp_path)
    module = candidate_module(result.source, tmp_path)
    for sizes in SDPA_SHAPES[name]:
        ns = task_namespace(load_task(path), sizes)
        torch.manual_seed(0)
        inputs = [x.to(DEVICE) for x in ns["get_inputs"]()]
        with torch.no_grad():
            out, ref = module.ModelNew()(*inputs), ns["Model"]()(*inputs)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


def test_sdpa_with_dropout_stays_torch():
    from kernelwright.codegen.attention import _supported
    from kernelwright.codegen.ir import TORCH, Node

    q = Node("q", "input", "input", shape=(2, 4, 8, 16))
    n = Node("a", TORCH, "call", (q, q, q), kwargs={"dropout_p": 0.1})
    assert _supported(n) is None
    n.kwargs = {"is_causal": True}
    assert _supported(n) is not None


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_flash_kernel_compiles_and_matches_sdpa_on_the_gpu(tmp_path, dtype):
    path, _ = SDPA["causal"]
    result = generate(str(path), dtype={torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype])
    assert result.ok, result.reason
    module = candidate_module(result.source, tmp_path)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 300, 128, device="cuda", dtype=dtype) for _ in range(3))
    mask = torch.rand(300, 300, device="cuda") > 0.2
    atol = 1e-4 if dtype == torch.float32 else 2e-2
    with torch.no_grad():
        for kw in ({"is_causal": True}, {"attn_mask": mask}, {}):
            out = module._attention(q, k, v, **kw)
            ref = torch.nn.functional.scaled_dot_product_attention(
                q.double(), k.double(), v.double(), **kw
            ).to(dtype)
            torch.testing.assert_close(out, ref, atol=atol, rtol=atol)
