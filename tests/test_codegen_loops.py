"""codegen/loops.py: a forward's loop over a traced size, its body outlined into a fused step."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_codegen_harness import check_equal, task_path

from kernelwright.codegen import generate
from kernelwright.codegen.loops import find


def test_the_outlined_loop_matches_model_at_every_size(tmp_path: Path):
    source = check_equal(
        "time_loop",
        tmp_path,
        [{}, {"batch": 3, "steps": 1, "hidden": 9}, {"steps": 11, "features": 5}],
    )
    # The loop stays Python, as the task writes it; its body is the step's two kernels.
    assert "for t in range(steps):" in source
    assert "h, total, outs_item = self._loop_step(x_t, x_t2, h, total)" in source
    assert "x_t = x[:, t]" in source and "x_t2 = x[:, t, :1]" in source
    assert "return torch.stack(outs, dim=1) + total.sum(dim=1)[:, None, None]" in source


def test_a_hand_written_lstm_carries_two_states_backwards(tmp_path: Path):
    source = check_equal(
        "lstm_loop", tmp_path, [{}, {"seq_len": 1, "batch": 3}, {"hidden_size": 9}], calls=2
    )
    assert "for t in range(seq_len - 1, -1, -1):" in source
    assert "c, h = self._loop_step(x_t, h, c)" in source


def test_the_step_is_two_fused_matmuls():
    result = generate(task_path("time_loop"))
    assert result.groups == (
        "matmul: linear -> tanh -> mul -> add",
        "matmul: linear -> relu -> add",
    )


TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(8, 8)
        self.layers = 3

    def forward(self, x, h):
        outs = []
{body}
        return torch.stack(outs)


n = 5


def get_inputs():
    return [torch.randn(n, 2, 4), torch.randn(2, 4)]


def get_init_inputs():
    return []
"""


def _task(tmp_path: Path, body: str) -> str:
    path = tmp_path / "task.py"
    path.write_text(TASK.format(body=textwrap.indent(textwrap.dedent(body), " " * 8)))
    return str(path)


LOOP = """
for t in range(x.size(0)):
    h = torch.tanh(self.cell(torch.cat([x[t], h], dim=1)))[:, :4]
    {extra}
    outs.append(h)
"""

REFUSED = [
    ("if h.sum() > 0:\n        break", "leaves it early (Break)"),
    ("self.h = h", "stores state on an object"),
    ("h = h * t", "uses its variable 't' other than as an index"),
    ("h = torch.cat([h, x[t]], dim=1)", "the loop's 'h' changes from (2, 4) to (2, 8)"),
    ("h = h + n", "depends on the task's constants"),  # baked into the step: the variant sees it
    ("y = outs[-1]", "reads the list 'outs' it appends to"),
]


@pytest.mark.parametrize("extra, why", REFUSED, ids=[w for _, w in REFUSED])
def test_what_the_outliner_refuses_says_why(tmp_path: Path, extra: str, why: str):
    result = generate(_task(tmp_path, LOOP.format(extra=extra)))
    assert result.source is None
    assert why in result.reason, result.reason


def test_the_code_around_the_loop_reads_only_forwards_names(tmp_path: Path):
    loop = LOOP.format(extra="").replace("range(x.size(0))", "range(x.size(0) - n + 5)")
    result = generate(_task(tmp_path, loop))
    assert "the code around the loop at line 15 reads the module-level name 'n'" in result.reason


def test_a_loop_over_a_python_int_is_traced_through(tmp_path: Path):
    # range(self.layers) is an int: torch.fx unrolls it, and nothing is outlined.
    body = """
    for i in range(self.layers):
        h = torch.tanh(self.cell(torch.cat([x[i], h], dim=1)))[:, :4]
        outs.append(h)
    """
    result = generate(_task(tmp_path, body))
    assert result.ok, result.reason
    assert "_loop_step" not in result.source and "for i in range" not in result.source


def test_find_names_the_steps_inputs_and_outputs():
    loop = find(Path(task_path("time_loop")).read_text())
    assert loop is not None
    assert (loop.var, loop.inputs, loop.carried) == (
        "t",
        ("x_t", "x_t2", "h", "total"),
        ("h", "total"),
    )
    assert loop.appends == (("outs", "outs_item"),)
    assert (
        find(
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x\n"
        )
        is None
    )
    # The loop at the line that stopped the tracer; another loop stays in the code around it.
    two = (
        "class Model:\n    def forward(self, x):\n        for i in range(3):\n"
        "            x = x * 2\n        for j in range(x.size(0)):\n            x = x + 1\n"
        "        return x\n"
    )
    assert find(two, lineno=5).var == "j" and find(two).var == "i"
    assert find(two, lineno=4) is None
