"""The prompts state each forward input's shape, dtype and layout as the evaluator passes it."""

from __future__ import annotations

import json

import torch
from test_agents import PLAN
from test_agents_support import FakePool, make_context

from kernelwright.agents import coder as coder_mod
from kernelwright.agents import critic as critic_mod
from kernelwright.agents import planner as planner_mod
from kernelwright.agents.llm import render_content
from kernelwright.agents.taskfacts import describe, input_lines
from kernelwright.sandbox.task import load_task

NUMPY_INPUTS = """
import numpy as np
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.from_numpy(np.exp(torch.randn(4, 4).numpy()))]


def get_init_inputs():
    return []
"""


def test_each_input_is_named_with_its_shape_dtype_and_layout():
    lines = input_lines(load_task("tests/tasks/fusion_permuted_rows.py"), "bf16")
    assert lines[0] == (
        "`x`: (2, 24, 20) bfloat16, strides (480, 1, 24): not contiguous, a permuted view of a "
        "tensor stored in dim order (0, 2, 1) (.contiguous() would copy it)"
    )
    assert lines[1].startswith("`y`: (2, 3, 5, 12) bfloat16") and "(0, 3, 1, 2)" in lines[1]
    bag = input_lines(load_task("tests/tasks/fusion_embedding_bag.py"), "fp32")
    assert bag == (
        "`ids`: (3, 7) int64, contiguous",  # integers keep their dtype
        "`ids32`: (5, 5) int32, contiguous",
        "`single`: (3,) int64, contiguous",
    )


def test_views_that_are_not_permutations_are_told_apart():
    x = torch.empty(4, 6, 8)
    assert describe(x[:, :, ::2], torch.float32).endswith(
        "not contiguous (a slice: rows have gaps)"
    )
    assert "an expanded view" in describe(torch.empty(4, 1).expand(4, 6), torch.float32)
    assert describe(3, torch.float32) == "3 (int)"


def test_a_task_whose_inputs_need_a_real_device_gets_no_facts(tmp_path):
    path = tmp_path / "numpy_inputs.py"
    path.write_text(NUMPY_INPUTS)
    assert input_lines(load_task(path), "fp32") == ()


def test_planner_coder_and_critic_prompts_carry_the_input_facts(tmp_path):
    ctx = make_context(tmp_path, FakePool(), task="fusion_permuted_rows")
    state = {"round": 1, "plans": [PLAN], "candidates": [], "critiques": [], "profile": {}}
    fact = "a permuted view of a tensor stored in dim order (0, 2, 1)"
    coder = coder_mod.coder_messages(state, ctx, PLAN, PLAN.ideas[0], 1, 1)
    planner = planner_mod.planner_messages(state, ctx, 2)
    critic = critic_mod.critic_messages(state, ctx, [], critic_mod.rules_critique(1, [], {}))
    for messages in (coder, planner, critic):
        text = json.dumps([render_content(m["content"]) for m in messages])
        assert "Inputs as the evaluator passes them to forward (floats at fp32)" in text
        assert fact in text
