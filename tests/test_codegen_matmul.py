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
