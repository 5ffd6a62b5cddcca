"""pysrc.fit: a statement over the line limit wrapped as ruff format wraps it, meaning unchanged."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelwright.codegen.pysrc import LINE, fit, split_top

ROOT = Path(__file__).resolve().parents[1]

NAMES = ", ".join(
    f"nn.Conv2d(channels_{i}, channels_{i + 1}, 3, stride, 1, bias=False)" for i in range(3)
)
STATEMENTS = [
    # a return of a nested constructor
    f"return nn.Sequential({NAMES}, nn.BatchNorm2d(channels_3), nn.ReLU(inplace=True))",
    # a list display of lists
    "inverted_residual_setting = ["
    + ", ".join(f"[{i}, {16 * i}, {i % 3 + 1}, {i % 2 + 1}]" for i in range(1, 11))
    + "]",
    # a list comprehension inside a call
    "self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d_model=embed_dim, nhead=num_heads, "
    "dim_feedforward=int(embed_dim * mlp_ratio), dropout=0.0, batch_first=True) "
    "for _ in range(num_layers)])",
    # a call inside a display element, one level deeper
    "features = [nn.Conv2d(3, input_channel, 3, 2, 1, bias=False), nn.BatchNorm2d(input_channel), "
    "nn.ReLU6(inplace=True)]",
    # brackets and commas inside string literals are not split
    'self.names = dict(first="a, (b", second="c], d", third="e) f, g", fourth="h[, i", '
    'fifth="j, k}", sixth="l")',
    # an augmented assignment (a Welford update of Swin V2's long names): its right side wrapped,
    # never the statement (`(acc += ...)` is a syntax error)
    "var_27_m2 += mlp_fc2_bm2_of_layer_3 + mlp_fc2_delta * mlp_fc2_delta * var_27_n_over_the_total",
    "self.total[0] -= first_partial_sum_of_the_rows + second_partial_sum_of_the_rows + extra_terms",
]


@pytest.mark.parametrize("stmt", STATEMENTS)
def test_a_long_statement_is_wrapped_with_its_meaning_kept(stmt, tmp_path):
    line = "        " + stmt
    assert len(line) > LINE
    lines = fit(line)
    assert len(lines) > 1 and all(len(x) <= LINE for x in lines), "\n".join(lines)
    wrapped = "\n".join(x[8:] for x in lines)
    assert ast.dump(ast.parse(wrapped)) == ast.dump(ast.parse(stmt))
    if shutil.which("ruff") is None:
        return
    path = tmp_path / "wrapped.py"
    body = "\n".join(lines)
    path.write_text(f"class ModelNew:\n    def __init__(self):\n{body}\n")
    proc = subprocess.run(
        ["ruff", "format", "--config", str(ROOT / "pyproject.toml"), "--diff", str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_split_top_ignores_separators_in_brackets_and_strings():
    assert split_top('f(a, b), "c, d", [e, f], g', ",") == ["f(a, b)", ' "c, d"', " [e, f]", " g"]


def test_a_statement_of_no_known_shape_is_left_as_it_is():
    line = "        self.note = " + '"' + "x" * 120 + '"'
    assert fit(line) == [line]
