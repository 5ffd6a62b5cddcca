"""Convolutions as a Triton implicit GEMM with the pointwise epilogue fused (kernel_conv.py), and
CONV_IMPL's torch path (cuDNN, then the epilogue as one pointwise kernel), against Model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_codegen_harness import DEVICE, check_equal, task_path

from kernelwright.codegen import generate
from kernelwright.codegen.tunables import tune_constants

# The three implementations the sweep chooses from. F=None on the Triton ones: the launcher must
# not reach torch's convolution there (a candidate module without F would fail if it did).
TORCH, TRITON, TF32X3 = {"CONV_IMPL": 0}, {"CONV_IMPL": 1, "F": None}, {"CONV_IMPL": 2, "F": None}
ALL = (TORCH, TRITON, TF32X3)


def test_conv2d_stride_padding_dilation_groups_epilogue(tmp_path):
    # The second shape moves the geometry too: ModelNew reads it from self.conv at run time.
    shapes = [{}, {"height": 9, "width": 10, "stride": 1, "padding": 1, "dilation": 1, "groups": 4}]
    src = check_equal("conv_strided_groups", tmp_path, shapes, configs=ALL)
    assert "tl.dot(a, b, acc, input_precision=PRECISION)" in src
    assert "self.conv.stride" in src and "F.conv2d(" in src
    assert "torch.clamp" not in src  # the epilogue is in the kernels, not torch


def test_conv3d_without_bias(tmp_path):
    check_equal("conv3d", tmp_path, [{}, {"depth": 4, "height": 5, "width": 4}], configs=ALL)


def test_depthwise_takes_the_cuda_core_product(tmp_path):
    src = check_equal("conv_depthwise", tmp_path, [{}, {"height": 5, "width": 11}], configs=ALL)
    assert "dot = c_out_g >= 16 and K >= 16" in src


@pytest.mark.parametrize("name", ["conv_transpose", "conv_transpose3d"])
def test_transposed(tmp_path, name):
    shapes = {
        "conv_transpose": [{}, {"height": 4, "width": 3, "stride": 3, "kernel_size": 4}],
        "conv_transpose3d": [{}, {"depth": 2, "height": 3, "width": 4}],
    }[name]
    src = check_equal(name, tmp_path, shapes, configs=ALL)
    assert "TRANSPOSED=True" in src


@pytest.mark.parametrize("name", ["conv_strided_groups", "conv_transpose", "conv_depthwise"])
def test_fp16(tmp_path, name):
    check_equal(name, tmp_path, [{}], dtype=torch.float16, configs=(TORCH, TRITON))


def test_bf16_cuda_core_path(tmp_path):
    check_equal("conv_depthwise", tmp_path, [{}], dtype=torch.bfloat16, configs=(TORCH, TRITON))


@pytest.mark.gpu
@pytest.mark.skipif(
    DEVICE != "cuda",
    reason="check_equal runs kernels in this process, where the stock interpreter's bf16 tl.dot "
    "is wrong (the evaluator's candidates get bf16interp.py; tests/test_interpreter_bf16.py)",
)
def test_bf16_tensor_cores(tmp_path):
    check_equal("conv_strided_groups", tmp_path, [{}], dtype=torch.bfloat16, configs=ALL)


def test_conv_impl_is_swept_first_with_cudnn_the_default():
    result = generate(task_path("conv_strided_groups"))
    found = tune_constants(result.source)
    assert found[0].name == "CONV_IMPL" and found[0].value == 0
    assert found[0].options == (0, 1, 2) == result.tunables["CONV_IMPL"]


def test_padding_modes_other_than_zeros_stay_torch(tmp_path):
    path = tmp_path / "reflect.py"
    source = Path(task_path("conv3d")).read_text()
    path.write_text(source.replace("bias=False", 'bias=False, padding_mode="reflect"'))
    result = generate(path)
    assert result.source is not None and "self.conv(x)" in result.source
    assert "CONV_IMPL" not in result.tunables


@pytest.mark.slow
@pytest.mark.parametrize("impl", [1, 2])
def test_evaluator_accepts_the_triton_kernels(impl):
    """The file the sweep tries for CONV_IMPL=1/2 passes the evaluator: static checks, guard,
    the other-shape variant, drift (the default, torch's, is in test_codegen_evaluate)."""
    from kernelwright.codegen.tunables import with_values
    from kernelwright.sandbox import EvalConfig, evaluate

    for name in ("conv_strided_groups", "conv_transpose"):
        source = with_values(generate(task_path(name)).source, {"CONV_IMPL": impl})
        verdict = evaluate(task_path(name), source, EvalConfig(trials=2, drift_calls=2))
        assert verdict.status == "ok", f"{name}: {verdict.status} {verdict.rule}: {verdict.message}"


def test_conv_before_other_kernels_keeps_the_torch_path(tmp_path):
    """A conv with nothing fused after it keeps cuDNN as an option when another kernel runs (a
    softmax after it); alone in the forward it has none (it would launch no kernel)."""
    path = tmp_path / "conv_softmax.py"
    source = Path(task_path("conv3d")).read_text()
    path.write_text(source.replace("torch.relu(self.conv(x) * 2.0)", "self.conv(x).softmax(1)"))
    src = generate(path).source
    assert "if CONV_IMPL == 0:" in src and "F.conv3d(" in src
    assert "if CONV_IMPL == 0:" not in generate(task_path("conv_only")).source


def test_rectangular_kernels_strides_paddings_and_dilations(tmp_path):
    # Every conv test kernel was square: a kernel read with its height and width swapped passed.
    src = check_equal("conv_rect", tmp_path, [{}, {"height": 6, "width": 9}], configs=ALL)
    assert "TRANSPOSED=True" in src and "TRANSPOSED=False" in src
