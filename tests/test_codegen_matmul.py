"""matmul / bmm / linear / addmm as a tiled tl.dot kernel with the pointwise epilogue fused."""

from __future__ import annotations

import torch
from test_codegen_harness import check_equal


def test_linear_gelu_scale_residual(tmp_path):
    src = check_equal(
        "linear_gelu",
        tmp_path,
        [{}, {"batch_size": 19, "in_features": 33, "out_features": 21}],
        configs=({}, {"MATMUL_TF32X3": 1}),
    )
    assert "tl.dot(" in src and "input_precision=PRECISION" in src


def test_bmm_residual_transposed_weight_addmm(tmp_path):
    src = check_equal("bmm", tmp_path, [{}, {"batch": 3, "m": 17, "k": 19, "n": 22}])
    assert src.count("_kernel[grid](") == 3  # three products, each with its epilogue


def test_linear_fp16(tmp_path):
    check_equal("linear_gelu", tmp_path, [{}], dtype=torch.float16)


def test_einsum_products(tmp_path):
    # KernelBench's 4-D tensor-matrix product is an einsum; it had no candidate.
    src = check_equal("einsum", tmp_path, [{}, {"batch": 1, "i": 2, "j": 7, "l": 9, "k": 6}])
    assert src.count("_kernel[grid](") == 3  # the three products; the outer product is torch's
    assert 'torch.einsum("i,j->ij"' in src


def test_only_einsums_that_are_one_product_become_one():
    from kernelwright.codegen.normalize_matmul import einsum_as_matmul

    assert einsum_as_matmul("bijl,lk->bijk", 4, 2) is False
    assert einsum_as_matmul("ij,kj->ik", 2, 2) is True  # b read transposed, as a Linear weight
    assert einsum_as_matmul("bij,bjk->bik", 3, 3) is False
    assert einsum_as_matmul("ij,jk", 2, 2) is False  # implicit output "ik"
    for equation, ra, rb in [
        ("zij,zjk", 3, 3),  # implicit output "ikz": the batch index moves last
        ("ij,jk->ki", 2, 2),  # the output transposed
        ("bij,bkj->bik", 3, 3),  # a batched b read transposed
        ("ii,ij->ij", 2, 2),  # a diagonal
        ("...j,jk->...k", 2, 2),  # an ellipsis
        ("ij,jk->i", 2, 2),  # an index summed out besides the product's
        ("ji,jk->ik", 2, 2),  # a's contracted index not its last
        ("ij,jk,kl->il", 2, 2),  # three operands
    ]:
        assert einsum_as_matmul(equation, ra, rb) is None, equation
