"""generate()'s contract: a FusionResult with a candidate the evaluator accepts, or a reason."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_codegen_harness import TASKS, check_equal, task_path

from kernelwright.codegen import FusionResult, generate
from kernelwright.codegen.tunables import tune_constants
from kernelwright.sandbox.rules import format_violations
from kernelwright.sandbox.static.check import static_check
from kernelwright.sandbox.task import load_task

GENERATED = sorted(
    p.stem.removeprefix("fusion_")
    for p in TASKS.glob("fusion_*.py")
    if p.stem not in ("fusion_untraceable", "fusion_sort_only")
)


def test_untraceable_model_gets_a_reason():
    result = generate(task_path("untraceable"))
    assert result.source is None and not result.ok
    assert result.reason.startswith("no offline candidate: torch.fx cannot trace Model.forward")
    assert "line 12" in result.reason


def test_nothing_to_fuse_gets_a_reason():
    result = generate(task_path("sort_only"))
    assert result.source is None
    assert result.reason == "no offline candidate: nothing to fuse: forward is only sort"


def test_result_fields_and_tunables():
    result = generate(load_task(task_path("linear_gelu")))  # a sandbox Task works too
    assert isinstance(result, FusionResult) and result.ok
    assert result.groups == ("matmul: linear -> gelu -> mul -> add",)
    assert set(result.tunables) >= {"MATMUL_BLOCK_M", "MATMUL_TF32X3"}
    declared = {t.name: t for t in tune_constants(result.source)}  # the one reader of the format
    for name, choices in result.tunables.items():
        assert declared[name].options == choices
        assert declared[name].value in choices


def test_fp16_tiles_differ():
    fp32 = generate(task_path("linear_gelu")).source
    fp16 = generate(task_path("linear_gelu"), dtype="fp16").source
    assert "MATMUL_BLOCK_M = 64" in fp32 and "MATMUL_BLOCK_M = 128" in fp16


@pytest.mark.parametrize("name", GENERATED)
def test_candidate_passes_static_checks(name):
    result = generate(task_path(name))
    assert result.ok, result.reason
    violations = static_check(result.source)
    assert not violations, format_violations(violations)
    assert "Model(" not in result.source.replace("ModelNew(", "")


def test_a_size_baked_into_forward_is_refused(tmp_path: Path):
    source = (TASKS / "fusion_softmax.py").read_text()
    baked = source.replace(
        "torch.softmax(x * self.scale, dim=-1)",
        "torch.softmax(x.view(batch_size, dim) * self.scale, dim=-1)",
    )
    path = tmp_path / "baked.py"
    path.write_text(baked)
    result = generate(str(path))
    assert result.source is None
    assert "depends on the task's constants" in result.reason


def test_a_block_repeated_at_other_widths_is_written_once(tmp_path: Path):
    # The 80 batch norms of a ResNet made files over the evaluator's source limit: a group
    # whose code is another's up to its names calls the first one's launcher.
    src = check_equal("repeated_blocks", tmp_path, [{}, {"batch_size": 3, "hidden": 24}])
    assert src.count("@triton.jit") == 3  # linear+relu once, linear+sigmoid, the norms
    assert src.count("= _linear_relu(") == 2 and "_linear_relu_2" not in src
    assert "= _linear_sigmoid(" in src


def test_conditions_on_sizes_and_devices_are_decided_while_tracing(tmp_path: Path):
    # Level 3 writes `assert L == H * W`, `if x.device != self.clusters.device`, `import torch
    # as th`, `[x.item() for x in torch.linspace(...)]` in __init__ and `forward(self, x,
    # mask=None)`: each stopped the codegen. Slice bounds read their attribute at run time.
    src = check_equal("traced_conditions", tmp_path, [{}, {"batch_size": 3, "keep": 9}])
    assert not re.search(r"\bth\.", src) and "torch.linspace(0, rate, 3)" in src
    assert "    def forward(self, x, mask=None):" in src
    assert "[:, :attr_keep]" in src


def test_a_condition_on_values_still_stops_the_tracer(tmp_path: Path):
    source = (TASKS / "fusion_traced_conditions.py").read_text()
    path = tmp_path / "on_values.py"
    path.write_text(source.replace("if x.device != self.w.device:", "if x.sum() > 0:"))
    result = generate(str(path))
    assert result.source is None
    assert "cannot be used as inputs to control flow" in result.reason


def test_a_nested_tuple_of_a_module_feeds_the_fused_part(tmp_path: Path):
    src = check_equal("lstm_state", tmp_path, [{}, {"batch_size": 2, "hidden_size": 7}])
    assert "lstm[1][0]" in src and "lstm[1][1]" in src


def test_a_size_made_of_two_attributes_is_read_at_run_time(tmp_path: Path):
    src = check_equal("patch_size", tmp_path, [{}, {"patch": 2, "image": 8, "batch_size": 3}])
    assert "= self.patch * self.patch" in src


def test_a_number_forward_takes_is_a_kernel_argument(tmp_path: Path):
    src = check_equal("scalar_input", tmp_path, [{}, {"M": 7, "N": 9}])
    assert "def forward(self, A, s):" in src and "(A, s)" in src


def test_a_branch_on_the_dtype_is_not_baked_in(tmp_path: Path):
    source = (TASKS / "fusion_traced_conditions.py").read_text()
    path = tmp_path / "on_dtype.py"
    raised = 'raise ValueError(f"x is on {x.device}, the weight on {self.w.device}")'
    branch = source.replace("if x.device != self.w.device:", "if x.dtype == th.float16:")
    path.write_text(branch.replace(raised, "x = x * 0.5"))
    result = generate(str(path))
    assert result.source is None and "branches on its inputs' dtype" in result.reason


def test_int_of_a_traced_size_and_module_level_helpers_are_copied(tmp_path: Path):
    """Swin's window_reverse (`B = int(windows.shape[0] / ...)`), its `to_2tuple = _ntuple(2)`
    with the imports that helper uses, and a never-taken branch reading an undefined name."""
    src = check_equal("window_helpers", tmp_path, [{}, {"batch_size": 2, "dim": 8}])
    assert "int(" in src
    assert "from itertools import repeat" in src and "import collections.abc" in src
    assert src.index("def _ntuple") < src.index("to_2tuple = _ntuple(2)")
    assert "batch_size = " not in src  # a size the evaluator varies is never copied


def test_einops_rearrange_a_traced_size_factory_and_a_default_none_parameter(tmp_path: Path):
    """Mamba's forward: rearrange written as reshape and permute (a candidate imports no
    einops), torch.ones(T, T, dtype=bool) of a traced T, `initial=None` left at its default;
    and the chunk read from self.chunk, not from self.head, which holds the same value at the
    task's sizes and at every size the variant moves both to (a wrong candidate elsewhere)."""
    shapes = [{}, {"seq": 24, "chunk": 6}, {"head": 3}, {"batch_size": 3, "head": 5, "chunk": 2}]
    src = check_equal("rearrange_chunks", tmp_path, shapes)
    assert "einops" not in src and "rearrange" not in src
    assert "self.chunk" in src and "self.head" not in src.split("def forward")[1]
    assert "def forward(self, x, initial=None):" in src


def test_a_fusion_that_holds_only_where_two_equal_sizes_stay_equal_is_refused():
    result = generate(str(TASKS / "equal_sizes_row.py"), dtype="fp32")
    assert result.source is None and "two of the task's sizes are equal" in result.reason


def test_numpy_constants_of_init_are_written_as_their_values(tmp_path: Path):
    """Swin V2's `/ np.log2(8)`: numpy on number literals (and np.pi) folded to a literal, since a
    candidate cannot import numpy; numpy on anything else is refused as before."""
    src = check_equal("numpy_constants", tmp_path, [{}, {"batch_size": 3, "dim": 40}])
    assert "np." not in src and "numpy" not in src
    assert "/ 3.0" in src and repr(float(np.sqrt(2.0) * np.pi)) in src


def test_numpy_on_a_size_is_still_refused(tmp_path: Path):
    text = (TASKS / "fusion_numpy_constants.py").read_text()
    path = tmp_path / "numpy_size.py"
    path.write_text(text.replace("np.sqrt(2.0)", "np.sqrt(dim)"))
    result = generate(str(path))
    assert result.source is None and "reads the module-level name 'np'" in result.reason


def test_methods_init_calls_are_copied_into_model_new(tmp_path: Path):
    """ResNet's `self._make_layer(...)` in __init__: ModelNew crashed without the method."""
    src = check_equal("init_methods", tmp_path, [{}, {"batch_size": 3, "dim": 24}])
    assert "def _make_stage(self, dim, depth):" in src and "def _make_block(self, dim):" in src
    assert "def _scaled" not in src  # forward's alone: forward is written from the graph


def test_a_0_dim_tensor_made_of_a_number_in_forward_is_that_number(tmp_path: Path):
    """`torch.min(x, torch.tensor(self.constant_value))`: the elementwise minimum with the number
    (read from the attribute where it binds, else the float32 value torch.tensor gives it)."""
    src = check_equal("tensor_constant_min", tmp_path, [{}, {"batch_size": 3, "features": 24}])
    assert "_tensor_constant" not in src and "tl.minimum(" in src and "tl.maximum(" in src


def test_a_plain_tensor_nothing_reads_is_left_out_of_model_new(tmp_path: Path):
    """`self.h0 = torch.randn((2, batch_size, dim))` in __init__, read nowhere: the candidate
    could not size it (batch_size is the task's module-level constant) and needs it nowhere."""
    src = check_equal("unread_tensor", tmp_path, [{}, {"batch_size": 3, "dim": 40}])
    assert "self.h0" not in src and "batch_size" not in src


def test_state_outside_the_state_dict_gets_a_reason():
    # KernelBench's stateful VanillaRNN: `self.hidden` is neither a parameter nor a buffer.
    result = generate(str(TASKS / "plain_tensor_state.py"))
    assert result.source is None
    assert result.reason == (
        "no offline candidate: forward reads self.hidden, a tensor that is neither a parameter "
        "nor a buffer (state kept outside the model's state_dict)"
    )
