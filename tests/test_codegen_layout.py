"""Row groups over inputs stored in a permuted order are written over that storage order."""

from __future__ import annotations

import torch
from test_codegen_harness import DEVICE, candidate_module, check_equal, task_path

from kernelwright.codegen import generate
from kernelwright.codegen.layout import memory_order
from kernelwright.codegen.trace import TensorInfo


def info(t: torch.Tensor) -> TensorInfo:
    return TensorInfo(tuple(t.shape), t.dtype, tuple(t.stride()))


def test_memory_order_of_dense_permuted_views():
    x = torch.empty(2, 5, 7)
    assert memory_order(info(x)) is None  # contiguous: nothing to do
    assert memory_order(info(x.transpose(1, 2))) == (0, 2, 1)
    assert memory_order(info(torch.empty(2, 3, 4, 5).permute(0, 2, 3, 1))) == (0, 3, 1, 2)
    assert memory_order(info(torch.empty(6, 4).t())) == (1, 0)


def test_memory_order_refuses_what_is_not_a_permuted_dense_tensor():
    x = torch.empty(4, 6, 8)
    assert memory_order(info(x[:, :, ::2])) is None  # gaps
    assert memory_order(info(x[:, :3].transpose(1, 2))) is None  # a slice: gaps between rows
    assert memory_order(info(torch.empty(4, 1, 8).expand(4, 6, 8).transpose(1, 2))) is None
    assert memory_order(info(torch.empty(4, 1, 8).transpose(1, 2))) is None  # size-1 dims


def test_the_launcher_reads_in_storage_order_and_writes_eagers_layout(tmp_path):
    result = generate(task_path("permuted_rows"))
    assert result.ok, result.reason
    assert result.groups[0] == (
        "row (reduce dim(s) 2 of a rank-3 tensor stored in order (0, 2, 1)): mul -> add -> softmax"
    )
    source = result.source
    for line in (
        "x = x.permute(0, 2, 1).contiguous()",
        "y = y.permute(0, 3, 1, 2).contiguous()",
        "z = z.permute(1, 0).contiguous()",
        "v_softmax = torch.empty((shape[0], shape[2], shape[1]), dtype=x.dtype, device=x.device)",
    ):
        assert line in source
    assert source.count("out_offs = outer * n_red * n_inner + inner[None, :] * n_red") == 6

    # Inputs in the traced layout or any other give eager's values, in eager's (contiguous)
    # layout: the permute is free only when the storage order matches.
    module = candidate_module(source, tmp_path)
    model = module.ModelNew()
    x = torch.randn(2, 20, 24, device=DEVICE).transpose(1, 2)
    y = torch.randn(2, 12, 3, 5, device=DEVICE).permute(0, 2, 3, 1)
    z = torch.randn(33, 9, device=DEVICE).t()
    expected = (torch.softmax(x * 2 + 1, -1), torch.log_softmax(y, -1) * 0.5, torch.softmax(z, 1))
    for args in ((x, y, z), (x.contiguous(), y.contiguous(), z.contiguous())):
        got = model(*args)
        for g, e in zip(got, expected):
            assert g.is_contiguous() and g.shape == e.shape
            torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


def test_permuted_rows_match_the_model_at_other_sizes_and_long_rows(tmp_path):
    shapes = [{}, {"dim": 70, "seq_len": 5, "channels": 3, "rows": 1, "cols": 130}]
    # ROW_MAX_BLOCK 64 sends the longer rows through the multi-pass path.
    check_equal("permuted_rows", tmp_path, shapes, configs=({}, {"ROW_MAX_BLOCK": 64}))


def test_permuted_rows_in_bf16(tmp_path):
    check_equal("permuted_rows", tmp_path, [{}], dtype=torch.bfloat16)
