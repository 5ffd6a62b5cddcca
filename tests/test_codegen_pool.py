"""Pooling as the forward's whole work (kernel_pool.py): max and average pooling in 1, 2 and 3
dims, with padding, dilation, ceil_mode and both divisors, against torch under the interpreter
(on a GPU: compiled), at the task's sizes and at others."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from test_codegen_harness import DEVICE, candidate_module, check_ruff, compare_outputs

from kernelwright.codegen import generate
from kernelwright.sandbox.task import build_inputs, build_reference, load_task, task_namespace

TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.{module}({args})

    def forward(self, x):
        return self.pool(x)

batch_size = 2
channels = 3
{sizes}

def get_inputs():
    return [torch.randn(batch_size, channels, {dims})]

def get_init_inputs():
    return []
"""

CASES = {
    "max1d_dilated": ("MaxPool1d", "kernel_size=4, stride=1, padding=2, dilation=3", [40]),
    "max2d_ceil": ("MaxPool2d", "kernel_size=3, stride=2, padding=1, ceil_mode=True", [15, 17]),
    "max3d_mixed": (
        "MaxPool3d",
        "kernel_size=(2, 3, 2), padding=(1, 1, 0), dilation=(1, 2, 1)",
        [9, 10, 8],
    ),
    "avg1d_exclude_pad": (
        "AvgPool1d",
        "kernel_size=5, stride=2, padding=2, count_include_pad=False",
        [31],
    ),
    "avg2d_ceil_include_pad": ("AvgPool2d", "kernel_size=3, padding=1, ceil_mode=True", [16, 13]),
    "avg3d_ceil_exclude_pad": (
        "AvgPool3d",
        "kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False",
        [9, 11, 7],
    ),
}


def pool_task(tmp_path: Path, case: str) -> Path:
    module, args, dims = CASES[case]
    names = [f"dim{i}" for i in range(len(dims))]
    sizes = "\n".join(f"{n} = {v}" for n, v in zip(names, dims))
    path = tmp_path / f"{case}.py"
    path.write_text(
        textwrap.dedent(TASK).format(module=module, args=args, sizes=sizes, dims=", ".join(names))
    )
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_pooling_alone_is_a_kernel_right_at_other_sizes(case, tmp_path):
    path = pool_task(tmp_path, case)
    result = generate(str(path))
    assert result.source is not None, result.reason
    assert "pooling" in result.reason and "_pool_size" in result.source
    module = candidate_module(result.source, tmp_path)
    task = load_task(path)
    dims = CASES[case][2]
    other = {"batch_size": 3, "channels": 2} | {f"dim{i}": d + 3 for i, d in enumerate(dims)}
    for overrides in ({}, other):
        ns = task_namespace(task, overrides)
        ref = build_reference(ns, torch.float32, DEVICE, seed=1)
        new = module.ModelNew().to(DEVICE)
        x = build_inputs(ns, torch.float32, DEVICE, seed=5)
        with torch.no_grad():
            compare_outputs(new(*x), ref(*x), torch.float32)


def test_max_pooling_keeps_torch_nan_and_half_precision(tmp_path):
    path = pool_task(tmp_path, "max2d_ceil")
    source = generate(str(path), dtype="fp16").source
    check_ruff(source, tmp_path)
    module = candidate_module(source, tmp_path)
    pool = torch.nn.MaxPool2d(kernel_size=3, stride=2, padding=1, ceil_mode=True)
    x = torch.randn(2, 3, 15, 17, device=DEVICE).half()
    x[0, 1, 4, 5] = float("nan")  # torch's max pooling propagates it to the windows holding it
    got, want = module.ModelNew().to(DEVICE)(x), pool(x.float()).half()
    assert torch.equal(got.isnan(), want.isnan()) and got.isnan().any()
    compare_outputs(got.nan_to_num(), want.nan_to_num(), torch.float16)


def test_pooling_inside_a_fused_forward_stays_torch(tmp_path):
    """Where the forward fuses something else, pooling is left to torch (cuDNN): the kernel is
    not yet timed against it."""
    path = tmp_path / "pool_relu.py"
    text = pool_task(tmp_path, "max2d_ceil").read_text()
    path.write_text(text.replace("return self.pool(x)", "return torch.relu(self.pool(x)) * 2.0"))
    result = generate(str(path))
    assert result.source is not None and "pooling" not in result.reason
    assert "self.pool(" in result.source
