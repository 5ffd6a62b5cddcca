"""Reductions and normalisations over any dim, with pointwise ops before and after them."""

from __future__ import annotations

import pytest
from test_codegen_harness import check_equal

# Rows in registers (the defaults), and streamed in blocks of 8 (several passes) at tiny sizes.
LOOPED = ({}, {"ROW_MAX_BLOCK": 16, "ROW_LOOP_BLOCK": 8})
SPLITS = ({}, {"SPLIT_PROGRAMS": 3, "SPLIT_BLOCK": 16})


def test_softmax_scale_clamp(tmp_path):
    src = check_equal("softmax", tmp_path, [{}, {"batch_size": 5, "dim": 37}], configs=LOOPED)
    assert "tl.exp" in src


def test_l1_l2_frobenius_norms(tmp_path):
    src = check_equal("norms", tmp_path, [{}, {"batch_size": 3, "dim": 29}], configs=LOOPED)
    assert "_partial_kernel" in src  # the Frobenius norm is a whole-tensor split reduction


def test_layernorm_residual_gelu(tmp_path):
    check_equal("layernorm", tmp_path, [{}, {"batch_size": 2, "d1": 3, "d2": 9}], configs=LOOPED)


def test_rmsnorm_written_out_over_dim1(tmp_path):
    src = check_equal(
        "rmsnorm", tmp_path, [{}, {"batch_size": 3, "dim1": 3, "dim2": 4}], configs=LOOPED
    )
    assert "BLOCK_I" in src  # a middle dim: (BLOCK_R, BLOCK_I) tiles


def test_sum_mean_max_min_arg_prod(tmp_path):
    check_equal(
        "reductions", tmp_path, [{}, {"batch_size": 2, "dim1": 7, "dim2": 5}], configs=LOOPED
    )


def test_log_softmax_dim1_and_logsumexp(tmp_path):
    check_equal("log_softmax", tmp_path, [{}, {"channels": 7, "width": 5}], configs=LOOPED)


def test_masked_cumsum_and_cumprod(tmp_path):
    check_equal("cumsum", tmp_path, [{}, {"batch_size": 2, "length": 19}], configs=LOOPED)


def test_cumsum_as_the_output_over_long_rows(tmp_path):
    # Rows past ROW_MAX_BLOCK: the scan is carried across blocks (the looped path once stored an
    # undefined value here, a compile error for any row longer than 16384).
    src = check_equal("cumsum_rows", tmp_path, [{}, {"batch_size": 3, "dim": 37}], configs=LOOPED)
    assert "v_cumsum_carry +=" in src


def test_losses_reduced_and_elementwise(tmp_path):
    # mse, l1, smooth L1 and Huber as functions and modules, 'mean', 'sum' and 'none', one
    # target broadcast over the rows: whole-tensor split reductions and a pointwise kernel.
    src = check_equal("losses", tmp_path, [{}, {"batch_size": 3, "dim": 50}], configs=SPLITS)
    assert "_partial_kernel" in src and "tl.where" in src


def test_cross_entropy_mean_sum_none_and_ignored_targets(tmp_path):
    # logsumexp per row (rows in registers and streamed), the target's logit picked by torch,
    # then whole-tensor sums of the row losses and of the targets counted.
    configs = ({}, {"ROW_MAX_BLOCK": 16, "ROW_LOOP_BLOCK": 8, "SPLIT_PROGRAMS": 3})
    shapes = [{}, {"batch_size": 5, "num_classes": 70}]
    src = check_equal("cross_entropy", tmp_path, shapes, configs=configs)
    assert ".gather(1, " in src and "_partial_kernel" in src and "== -100" in src


def test_var_std_and_written_out_variance(tmp_path):
    check_equal("var_std", tmp_path, [{}, {"batch_size": 3, "dim": 20}], configs=LOOPED)


def test_manual_softmax(tmp_path):
    check_equal("manual_softmax", tmp_path, [{}, {"dim": 21}], configs=LOOPED)


def test_groupnorm_swish_scale(tmp_path):
    check_equal(
        "groupnorm",
        tmp_path,
        [{}, {"out_channels": 6, "num_groups": 3, "height": 6}],
        configs=LOOPED,
    )


@pytest.mark.slow
def test_groupnorm_over_long_groups_takes_the_split_path(tmp_path):
    # Groups past GROUP_SPLIT_ELEMENTS at the traced shape: statistics as a split reduction (per
    # sample and group), normalised by a pointwise kernel; short groups keep the row kernel.
    # The emitted code is checked at a shape where every group is short too.
    shapes = [{}, {"batch_size": 3, "height": 5, "width": 7}]
    src = check_equal("groupnorm_long", tmp_path, shapes, configs=SPLITS)
    assert "_partial_kernel" in src and "repeat_interleave" in src
    assert "one program per" in src  # the short groups' row kernel


def test_instancenorm_relu(tmp_path):
    check_equal("instancenorm", tmp_path, [{}, {"channels": 3, "width": 5}], configs=LOOPED)


@pytest.mark.parametrize("calls", [2])
def test_batchnorm2d_train_and_eval(tmp_path, calls):
    """Batch statistics and the running-stat update in training, running stats in eval."""
    src = check_equal(
        "batchnorm",
        tmp_path,
        [{}, {"batch_size": 2, "out_channels": 5, "width": 6}],
        modes=(True, False),
        calls=calls,
        configs=SPLITS,
    )
    assert "if self.training:" in src and "num_batches_tracked.add_(1)" in src


def test_batchnorm1d_train_and_eval(tmp_path):
    check_equal(
        "batchnorm1d",
        tmp_path,
        [{}, {"batch_size": 7, "out_features": 9}],
        modes=(True, False),
        calls=2,
        configs=LOOPED,
    )


def test_per_channel_statistics_of_a_per_row_value_follow_the_rows(tmp_path):
    # rsqrt(running_var + eps) of an eval batch norm is (C, 1, 1); the row kernel read it at
    # the row index (B * C rows), out of bounds. Train mode first, so the statistics are not 1.
    check_equal("batchnorm_mean", tmp_path, [{}, {"batch_size": 3, "c": 5}], modes=(True, False))


def test_triplet_margin_loss_and_pairwise_distance(tmp_path):
    # KernelBench's TripletMarginLoss had no candidate ("nothing to fuse"): the distances are
    # row norms of a - p + eps, the hinge pointwise, 'mean' and 'sum' whole-tensor reductions.
    configs = ({}, {"ROW_MAX_BLOCK": 16, "ROW_LOOP_BLOCK": 8, "SPLIT_PROGRAMS": 3})
    src = check_equal("triplet", tmp_path, [{}, {"batch_size": 3, "dim": 50}], configs=configs)
    assert "_partial_kernel" in src and "tl.sqrt" in src and "torch.nn.functional" not in src
