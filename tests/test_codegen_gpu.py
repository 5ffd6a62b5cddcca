"""GPU-only checks of the fusion codegen: bf16 (in this process the stock interpreter's bf16 is
wrong; candidates judged on CPU get bf16interp.py) and tf32x3."""

from __future__ import annotations

import pytest
import torch
from test_codegen_harness import check_equal

pytestmark = pytest.mark.gpu


# Not bmm: its two chained products round the intermediate to bf16 in eager only, which the
# second product amplifies past the bf16 tolerance (the fused result is the more accurate one).
@pytest.mark.parametrize(
    "name", ["conv_bias_relu", "softmax", "layernorm", "groupnorm", "linear_gelu"]
)
def test_bf16(tmp_path, name):
    check_equal(name, tmp_path, [{}], dtype=torch.bfloat16)


def test_batchnorm_bf16_train_eval(tmp_path):
    check_equal("batchnorm", tmp_path, [{}], dtype=torch.bfloat16, modes=(True, False), calls=2)


# Kernels whose GPU code had only run under the interpreter: the einsum products (tl.dot with
# tf32x3 under fp32 strict) and the triplet loss's rows, at sizes past one block.
@pytest.mark.parametrize(
    "name, shapes",
    [
        ("einsum", [{}, {"batch": 4, "i": 16, "j": 64, "l": 256, "k": 192}]),
        ("triplet", [{}, {"batch_size": 1024, "dim": 4097}]),
    ],
)
def test_fp32_kernels_first_run_on_the_gpu(tmp_path, name, shapes):
    check_equal(name, tmp_path, shapes)
