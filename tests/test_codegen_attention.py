"""Attention written out by hand (KernelBench level 3's form): it traces, the scores' scale,
causal mask and softmax fuse into one row kernel, and the candidate is right at two shapes and
for other constructor arguments."""

from __future__ import annotations

import pytest
import torch
from test_codegen_harness import DEVICE, TASKS, candidate_module, check_ruff

from kernelwright.codegen import generate
from kernelwright.sandbox.task import load_task, task_namespace

TASK = TASKS / "fusion_causal_attention.py"


@pytest.fixture(scope="module")
def candidate():
    result = generate(str(TASK))
    assert result.ok, result.reason
    return result


def test_the_mask_scale_and_softmax_are_one_row_kernel(candidate):
    assert "row (reduce dim(s) 3 of a rank-4 tensor): mul -> eq -> masked_fill -> softmax" in (
        candidate.reason
    )
    src = candidate.source
    assert "self.bias[:, :, :getitem_1, :getitem_1]" in src  # T read at run time
    assert "split(attr_n_embd" in src and "// attr_n_head" in src  # attributes, not literals


@pytest.mark.parametrize(
    "sizes",
    [{}, {"batch_size": 3, "seq_len": 13, "n_embd": 30, "n_head": 5, "max_seqlen": 20}],
    ids=["task", "other"],
)
def test_causal_attention_is_right_at_two_shapes(tmp_path, candidate, sizes):
    check_ruff(candidate.source, tmp_path)
    module = candidate_module(candidate.source, tmp_path)
    ns = task_namespace(load_task(TASK), sizes)
    torch.manual_seed(0)
    ref = ns["Model"](*ns["get_init_inputs"]()).to(DEVICE)
    new = module.ModelNew(*ns["get_init_inputs"]()).to(DEVICE)
    new.load_state_dict(ref.state_dict())
    x = ns["get_inputs"]()[0].to(DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(new(x), ref(x), atol=1e-4, rtol=1e-4)
