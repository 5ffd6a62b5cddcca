"""Row groups with too few rows to fill the GPU: each row split over several programs
(codegen/kernel_row_split.py), against Model under the interpreter, and the choice of path."""

from __future__ import annotations

import pytest
import torch
from test_codegen_harness import candidate_module, check_equal, task_path

from kernelwright.codegen import generate

# The split path (the default for 2 or 3 rows on an H200's 132 SMs), then one program per row.
BOTH = ({}, {"ROW_SPLIT_WAVES": 0})
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
def test_softmax_and_log_softmax_split(tmp_path, dtype):
    src = check_equal("split_rows_softmax", tmp_path, [{}], dtype=dtype, configs=BOTH)
    assert "_partial_kernel" in src and "_apply_kernel" in src


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
def test_layernorm_gelu_split(tmp_path, dtype):
    # Welford states per split, combined per row; a row that is not a whole number of splits
    # (dim2=1000: the last program's part is short).
    shapes = [{}, {"batch_size": 2, "dim2": 1000}]
    check_equal("split_rows_layernorm", tmp_path, shapes, dtype=dtype, configs=BOTH)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
def test_sums_norms_extrema_and_indices_split(tmp_path, dtype):
    check_equal("split_rows_reductions", tmp_path, [{}], dtype=dtype, configs=BOTH)


def test_split_path_is_chosen_from_the_sizes(tmp_path):
    result = generate(task_path("split_rows_softmax"), dtype="fp32")
    module = candidate_module(result.source, tmp_path)
    cpu = torch.device("cpu")
    # 2 rows of 65536 on 132 SMs: SPLIT_PROGRAMS (1024) shared, at most one per 2048-block.
    assert module._row_splits(2, 65536, cpu) == 32
    assert module._row_splits(16, 2**22, cpu) == 1024 // 16
    assert module._row_splits(4 * 132, 2**22, cpu) == 1  # rows enough to fill the GPU
    assert module._row_splits(2, 16384, cpu) == 1  # a row in registers: one read already
    module.ROW_SPLIT_WAVES = 0
    assert module._row_splits(2, 65536, cpu) == 1


def test_only_few_long_rows_carry_the_split_path():
    # Many rows (the traced sizes fill the GPU) or short ones: the row kernel alone.
    for name in ("softmax", "layernorm", "reductions"):
        source = generate(task_path(name), dtype="fp32").source
        assert source is not None and "_row_splits" not in source, name


def test_split_is_deterministic(tmp_path):
    result = generate(task_path("split_rows_layernorm"), dtype="fp32")
    module = candidate_module(result.source, tmp_path)
    model = module.ModelNew(64, 1024)
    x = torch.randn(3, 64, 1024) * 2.0 + 3.0
    with torch.no_grad():
        first, second = model(x), model(x)
    assert torch.equal(first, second)  # a fixed combine order, no atomics


def test_batchnorm_then_plane_mean_split(tmp_path):
    # Train mode: the batch statistics come from the per-channel split reduction, the plane
    # mean of the normalised values from the row split. Eval mode: the running statistics
    # per channel, read in the row space (they were read out of their (C,) bounds before).
    small = {"height": 7, "width": 9}
    src = check_equal(
        "split_rows_batchnorm_centre", tmp_path, [{}, small], configs=BOTH, modes=(True, False)
    )
    assert "_apply_kernel" in src
    # Rows longer than a block, looped over in blocks of 8, split (8 programs a row) and not: at
    # the small planes only (63 values, 8 blocks); at 160x160 the interpreter ran 3200 blocks a
    # row for the same code path (90 s of the fast test set).
    looped = {"ROW_MAX_BLOCK": 16, "ROW_LOOP_BLOCK": 8}
    configs = (looped, {**looped, "ROW_SPLIT_WAVES": 0})
    check_equal(
        "split_rows_batchnorm_centre", tmp_path, [small], configs=configs, modes=(True, False)
    )
