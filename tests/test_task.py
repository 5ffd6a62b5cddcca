"""sandbox/task/: loading task files, size constants, variants, shrinking, references, inputs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from kernelwright.sandbox.task import (
    DTYPES,
    Task,
    TaskError,
    build_inputs,
    build_reference,
    input_bytes,
    load_parameters,
    load_task,
    parse_size,
    shrink,
    shrink_overrides,
    structural_constants,
    task_namespace,
    variant_note,
    variant_overrides,
)

ELEMENTWISE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2

batch_size = {batch_size}
dim = {dim}

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""

CONSTANTS = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=reduce_dim)

batch_size = 16
dim = 1
reduce_dim = 2
features = 4096
hidden: int = 64
height, width = 32, 24
chunk = 16 * 1024
N = 2 * hidden
eps = 1e-5
flag = True
stride = 1
twice = 8
twice = 9
kernel_size = 3

def get_inputs():
    return [torch.randn(batch_size, height, width)]

def get_init_inputs():
    return []
"""

CONV = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, groups=groups)
        self.norm = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))

batch_size = {batch_size}
in_channels = {in_channels}
out_channels = {out_channels}
height, width = {height}, {width}
kernel_size = 3
groups = 4

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
"""


def write(tmp_path: Path, text: str, name: str = "task.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def elementwise(tmp_path: Path, batch_size: int = 4, dim: int = 64) -> Task:
    return load_task(write(tmp_path, ELEMENTWISE.format(batch_size=batch_size, dim=dim)))


def conv(tmp_path: Path, **sizes: int) -> Task:
    defaults = dict(batch_size=2, in_channels=8, out_channels=16, height=12, width=12)
    return load_task(write(tmp_path, CONV.format(**{**defaults, **sizes}), "conv.py"))


# -- loading errors: one clear line each -----------------------------------------------------------


def test_missing_path_is_one_line(tmp_path):
    with pytest.raises(TaskError, match="task file not found") as e:
        load_task(tmp_path / "nope.py")
    assert "\n" not in str(e.value)


def test_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "import torch\n\ndef get_inputs(:\n    pass\n")
    with pytest.raises(TaskError, match=r"task\.py:3: syntax error"):
        load_task(path)


def test_missing_required_names_are_listed(tmp_path):
    path = write(tmp_path, "class Model:\n    pass\n\ndef get_inputs():\n    return []\n")
    with pytest.raises(TaskError, match="no get_init_inputs") as e:
        load_task(path)
    assert "get_inputs," not in str(e.value)


def test_unknown_shape_name_lists_the_known_ones(tmp_path):
    path = write(tmp_path, ELEMENTWISE.format(batch_size=4, dim=64))
    with pytest.raises(TaskError, match=r"unknown --shape name 'dims'.*batch_size, dim$"):
        load_task(path, {"dims": 3})


@pytest.mark.parametrize("value", ["abc", 1.5, True, 0, -3, None])
def test_non_integer_or_non_positive_value_is_refused(tmp_path, value):
    path = write(tmp_path, ELEMENTWISE.format(batch_size=4, dim=64))
    with pytest.raises(TaskError, match="positive integer"):
        load_task(path, {"dim": value})


def test_integer_strings_from_the_command_line_are_accepted(tmp_path):
    task = load_task(write(tmp_path, ELEMENTWISE.format(batch_size=4, dim=64)), {"dim": " 96 "})
    assert task.overrides == {"dim": 96}
    assert task.sizes == {"batch_size": 4, "dim": 96}


def test_an_error_while_executing_the_task_names_its_line(tmp_path):
    text = ELEMENTWISE.format(batch_size=4, dim=64) + "x = 1 / 0\n"
    path = write(tmp_path, text)
    line = len(text.splitlines())
    with pytest.raises(TaskError, match=rf"task\.py:{line}: executing the task failed: ZeroDiv"):
        task_namespace(load_task(path))


# -- size constants --------------------------------------------------------------------------------


def test_size_constant_heuristic(tmp_path):
    task = load_task(write(tmp_path, CONSTANTS))
    # dim=1 and reduce_dim=2 are axes; eps is a float, flag a bool, stride 1 is below 2; N is
    # derived; `twice` is assigned twice, so no single literal sets it.
    assert task.constants == {
        "batch_size": 16,
        "features": 4096,
        "hidden": 64,
        "height": 32,
        "width": 24,
        "chunk": 16384,
        "kernel_size": 3,
    }


def test_axis_name_with_a_large_value_is_a_size(tmp_path):
    task = elementwise(tmp_path, dim=16384)
    assert task.constants == {"batch_size": 4, "dim": 16384}


def test_overrides_are_set_in_the_ast_so_derived_constants_follow(tmp_path):
    task = load_task(write(tmp_path, CONSTANTS), {"hidden": 10, "height": 5, "chunk": 7})
    ns = task_namespace(task)
    assert (ns["hidden"], ns["N"], ns["height"], ns["width"], ns["chunk"]) == (10, 20, 5, 24, 7)
    assert ns["get_inputs"]()[0].shape == (16, 5, 24)
    again = task_namespace(task, {"width": 3})  # per-call overrides go on top of the task's
    assert (again["height"], again["width"]) == (5, 3)


def test_namespaces_are_fresh_modules_outside_sys_modules(tmp_path):
    task = elementwise(tmp_path)
    a, b = task_namespace(task), task_namespace(task)
    assert a["__name__"] != b["__name__"]
    assert a["__name__"] not in sys.modules and b["__name__"] not in sys.modules
    assert a["Model"] is not b["Model"]
    a["dim"] = 999
    assert b["dim"] == 64
    assert a["__file__"] == task.path == str(Path(task.path).resolve())


def test_hash_depends_on_text_and_sizes_only(tmp_path):
    text = ELEMENTWISE.format(batch_size=4, dim=64)
    a = load_task(write(tmp_path, text, "a.py"))
    b = load_task(write(tmp_path, text, "b.py"))
    assert a.hash == b.hash and len(a.hash) == 64
    assert load_task(a.path, {"dim": 64}).hash == a.hash  # an override equal to the default
    assert load_task(a.path, {"dim": 65}).hash != a.hash
    assert load_task(write(tmp_path, text + "\n# edited\n", "c.py")).hash != a.hash
    assert {a: 1}[load_task(a.path)] == 1  # usable as a cache key


# -- variants for the "other shape" check ----------------------------------------------------------


def test_first_variant_changes_every_constant_and_breaks_block_multiples(tmp_path):
    task = load_task(write(tmp_path, CONSTANTS))
    first = variant_overrides(task)[0]
    assert set(first) == set(task.constants)
    for name, value in task.constants.items():
        assert first[name] != value, name
        if value > 8:
            assert first[name] % 2 == 1 and first[name] < value, (name, first[name])
    assert first["features"] == 3511 and first["chunk"] == 14043


def test_variants_never_repeat_the_default_and_come_most_aggressive_first(tmp_path):
    task = load_task(write(tmp_path, CONSTANTS))
    variants = variant_overrides(task)
    assert task.sizes not in variants
    assert len(variants) == len({tuple(sorted(v.items())) for v in variants})
    changed = [sum(v[k] != task.sizes[k] for k in v) for v in variants]
    assert changed[0] == len(task.sizes)
    assert changed[-len(task.sizes) :] == [1] * len(task.sizes)  # one at a time comes last


STAGES = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, widths, blocks):
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(*[nn.Linear(widths[0], widths[0]) for _ in range(n)]) for n in blocks
        )

    def forward(self, x):
        for stage in self.stages:
            x = torch.relu(stage(x))
        return x

batch_size = 16
dim = 32
blocks = (2, 3)

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return [(dim,), blocks]
"""


def test_a_constant_that_changes_the_modules_is_never_varied(tmp_path):
    """ResNet's `layers = [3, 4, 23, 3]`: moving it builds another network (other parameters),
    for which a candidate written for the task's network is not wrong; sizes still move."""
    task = load_task(write(tmp_path, STAGES))
    assert structural_constants(task) == ["blocks"]
    variants = variant_overrides(task)
    assert variants and all(v["blocks"] == (2, 3) for v in variants)
    assert variants[0]["batch_size"] != 16 and variants[0]["dim"] != 32
    note = variant_note(task, variants[0])
    assert "not varied: blocks (moving it changes the model's modules" in note


def test_variant_is_never_larger_in_memory(tmp_path):
    # batch_size 2 can only grow (to 3); the large constant shrinks further to compensate.
    task = elementwise(tmp_path, batch_size=2, dim=4096)
    first = variant_overrides(task)[0]
    assert first["batch_size"] == 3
    assert input_bytes(task, first) <= input_bytes(task)
    for sizes in ({"batch_size": 64, "dim": 1000}, {"batch_size": 9, "dim": 9}):
        t = elementwise(tmp_path, **sizes)
        assert input_bytes(t, variant_overrides(t)[0]) <= input_bytes(t)


def test_a_variant_survives_divisibility_constraints_within_the_first_attempts(tmp_path):
    task = conv(tmp_path)  # in/out channels must stay multiples of groups=4
    ran = []
    for sizes in variant_overrides(task)[:6]:
        ns = task_namespace(task, sizes)
        try:
            with torch.device("meta"):
                ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
        except (RuntimeError, ValueError):
            continue
        ran.append(sizes)
    assert ran, "no variant among the first six runs the reference"
    assert all(ran[0][k] != v for k, v in task.sizes.items() if v % 4 == 0)


def test_variants_start_from_the_overridden_sizes(tmp_path):
    task = load_task(write(tmp_path, ELEMENTWISE.format(batch_size=4, dim=64)), {"dim": 100})
    assert variant_overrides(task)[0] == {"batch_size": 3, "dim": 85}


# -- shrinking for the interpreter -----------------------------------------------------------------


def test_shrink_fits_the_budget_keeping_ratios_and_small_constants(tmp_path):
    task = elementwise(tmp_path, batch_size=4096, dim=262144)  # 4 GiB: only meta can hold it
    sizes = shrink_overrides(task, 2**16)
    assert input_bytes(task, sizes) <= 2**16
    ratio = (sizes["dim"] / sizes["batch_size"]) / (262144 / 4096)
    assert 0.5 <= ratio <= 2, sizes
    assert min(sizes.values()) >= 2

    c = conv(tmp_path, batch_size=64, in_channels=64, out_channels=128, height=256, width=256)
    small = shrink_overrides(c, 2**18)
    assert input_bytes(c, small) <= 2**18
    assert small["kernel_size"] == 3 and small["groups"] == 4  # small constants kept
    ns = task_namespace(c, small)  # and the reference runs there
    out = build_reference(ns, "fp32", "cpu", 0)(*build_inputs(ns, "fp32", "cpu", 1))
    assert torch.isfinite(out).all()


def test_shrink_works_for_a_model_that_cannot_be_built_on_meta(tmp_path):
    text = ELEMENTWISE.format(batch_size=512, dim=4096).replace(
        "super().__init__()", "super().__init__()\n        self.scale = torch.ones(1).sum().item()"
    )
    task = load_task(write(tmp_path, text))
    sizes = shrink_overrides(task, 2**14)
    assert input_bytes(task, sizes) <= 2**14 and sizes["batch_size"] < 512


def test_shrink_keeps_a_size_the_model_fixes_where_meta_cannot_tell(tmp_path):
    """Swin's shape: `.item()` in __init__ (no meta build) and a forward that accepts one input
    size only (its img_size default). Shrinking that size would break the task's own reference;
    the shrink runs each step on the CPU instead and shrinks the other size."""
    text = (
        ELEMENTWISE.format(batch_size=512, dim=4096)
        .replace(
            "super().__init__()",
            "super().__init__()\n        self.scale = torch.ones(1).sum().item()\n"
            "        self.dim = 4096",
        )
        .replace(
            "return torch.relu(x) * 2",
            'assert x.shape[1] == self.dim, "input size does not match the model"\n'
            "        return torch.relu(x) * self.scale",
        )
    )
    task = load_task(write(tmp_path, text))
    sizes = shrink_overrides(task, 2**16)
    assert sizes["dim"] == 4096 and sizes["batch_size"] < 512
    assert input_bytes(task, sizes) <= 2**16
    assert shrink.runs_on_cpu(task, sizes)
    assert not shrink.runs_on_cpu(task, {**sizes, "dim": 2048})


def test_shrink_leaves_a_task_already_under_budget_alone(tmp_path):
    task = elementwise(tmp_path, batch_size=4, dim=64)
    assert shrink_overrides(task, 2**20) == task.sizes


def test_shrink_goes_below_sixteen_only_when_it_must(tmp_path):
    task = elementwise(tmp_path, batch_size=64, dim=64)
    sizes = shrink_overrides(task, 4 * 12 * 12)
    assert input_bytes(task, sizes) <= 4 * 12 * 12
    assert min(sizes.values()) >= 2


# -- reference and inputs --------------------------------------------------------------------------

LAYERS = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = nn.LayerNorm(features)
        self.bn = nn.BatchNorm1d(features)
        self.register_buffer("mask", torch.tril(torch.ones(features, features)))
        self.register_buffer("steps", torch.zeros(3, dtype=torch.long))

    def forward(self, x):
        return self.bn(self.norm(self.linear(x)))

features = 256

def get_inputs():
    return [torch.randn(32, features)]

def get_init_inputs():
    return [features]
"""


def test_build_reference_redraws_default_parameters_keeping_their_magnitude(tmp_path):
    ns = task_namespace(load_task(write(tmp_path, LAYERS)))
    model = build_reference(ns, "fp32", "cpu", seed=3)
    default = ns["Model"](256)
    w = model.norm.weight
    assert not torch.equal(w, torch.ones_like(w)) and abs(w.mean().item() - 1) < 0.1
    assert w.std().item() > 0.2 and (w >= 0).all()
    b = model.norm.bias
    assert b.abs().max().item() > 0.05 and abs(b.mean().item()) < 0.03
    assert (model.bn.running_var > 0).all() and abs(model.bn.running_var.mean().item() - 1) < 0.1
    lin, lin0 = model.linear.weight, default.linear.weight
    assert not torch.equal(lin, lin0)
    assert abs(lin.std().item() / lin0.std().item() - 1) < 0.05
    assert torch.equal(model.mask, torch.tril(torch.ones(256, 256)))  # a mask keeps its meaning
    assert torch.equal(model.steps, torch.zeros(3, dtype=torch.long))
    assert model.bn.num_batches_tracked.item() == 0
    assert model.training  # KernelBench semantics: batch norm in training mode


def test_build_reference_is_seeded_and_cast(tmp_path):
    ns = task_namespace(load_task(write(tmp_path, LAYERS)))
    a = build_reference(ns, "fp32", "cpu", seed=1)
    b = build_reference(ns, "fp32", "cpu", seed=1)
    c = build_reference(ns, "fp16", "cpu", seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.linear.weight, c.linear.weight.float())
    assert c.linear.weight.dtype == torch.float16 and c.steps.dtype == torch.long


INPUTS = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, *args):
        return args[0]

GLOBAL = torch.ones(4)

def get_inputs():
    a = torch.randn(6, 5).t()
    b = torch.randn(8, 10)[:, ::2]
    c = torch.randn(1, 5).expand(3, 5)
    return [a, b, c, torch.randint(0, 9, (4,)), 0.5, "mode", GLOBAL]

def get_init_inputs():
    return []
"""


def test_build_inputs_casts_floats_keeps_layout_and_copies(tmp_path):
    ns = task_namespace(load_task(write(tmp_path, INPUTS)))
    a, b, c, ints, scalar, text, glob = build_inputs(ns, "fp16", "cpu", seed=0)
    assert a.dtype == b.dtype == c.dtype == torch.float16 and ints.dtype == torch.long
    assert a.shape == (5, 6) and a.stride() == (1, 5) and not a.is_contiguous()
    assert b.shape == (8, 5) and b.stride() == (10, 2)
    assert c.stride() == (0, 1) and c.shape == (3, 5)
    assert (scalar, text) == (0.5, "mode")
    assert glob.data_ptr() != ns["GLOBAL"].data_ptr()  # a module-level tensor is copied


def test_build_inputs_is_seeded_without_disturbing_the_global_rng(tmp_path):
    ns = task_namespace(elementwise(tmp_path))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    x1 = build_inputs(ns, DTYPES["fp32"], "cpu", seed=5)[0]
    after = torch.rand(3)
    x2 = build_inputs(ns, "fp32", "cpu", seed=5)[0]
    x3 = build_inputs(ns, "fp32", "cpu", seed=6)[0]
    assert torch.equal(after, expected)
    assert torch.equal(x1, x2) and not torch.equal(x1, x3)


# -- copying parameters into a candidate -----------------------------------------------------------


class Ref(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.norm = nn.BatchNorm1d(3)


class SameNames(Ref):
    pass


class OtherNames(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3, 4))
        self.b = nn.Parameter(torch.zeros(3))
        self.gamma = nn.Parameter(torch.zeros(3))
        self.beta = nn.Parameter(torch.zeros(3))
        self.extra = nn.Parameter(torch.zeros(7))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))


def test_load_parameters_by_name():
    src, dst = Ref(), SameNames()
    for p in src.parameters():
        nn.init.normal_(p)
    assert load_parameters(src, dst) == []
    assert all(
        torch.equal(x, y) for x, y in zip(src.state_dict().values(), dst.state_dict().values())
    )


def test_load_parameters_by_order_and_shape_reports_the_unmatched():
    src, dst = Ref(), OtherNames()
    for p in src.parameters():
        nn.init.normal_(p)
    src.norm.num_batches_tracked.fill_(7)
    assert load_parameters(src, dst) == ["extra"]
    assert torch.equal(dst.w, src.linear.weight) and torch.equal(dst.b, src.linear.bias)
    assert torch.equal(dst.gamma, src.norm.weight) and torch.equal(dst.beta, src.norm.bias)
    assert dst.count.item() == 7  # the integer buffer matched the integer buffer, not a float


# -- chained, tuple and derived constants ----------------------------------------------------------

SHAPES = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features, kernel_size, block_widths):
        super().__init__()
        self.linear = nn.Linear(features, dim)
        self.pool = nn.AvgPool2d(kernel_size, stride=1)

    def forward(self, x, y):
        return self.pool(x), self.linear(y)

batch_size = 8
height = width = 40
channels: int = 3
kernel_size = (3, 5)
input_shape = (64, 20)
block_widths = [32, 64]
features = 48
dim = features * 2
seq = 24
bias_shape = (channels, 1, 1)
stride = (1, 1)
padding = (0, 2)
reduce_dims = (1, 2)
perm = (0, 2, 1)

def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x, torch.randn(seq * 2, *input_shape[1:], features)]

def get_init_inputs():
    return [features, kernel_size, block_widths]
"""


def shapes_task(tmp_path, overrides=None) -> Task:
    return load_task(write(tmp_path, SHAPES, "shapes.py"), overrides)


def test_chained_annotated_and_tuple_constants_are_size_constants(tmp_path):
    task = shapes_task(tmp_path)
    # dim and bias_shape are derived; the all-1 stride, the axes and the permutation hold no size.
    assert task.constants == {
        "batch_size": 8,
        "height": 40,
        "width": 40,
        "channels": 3,
        "kernel_size": (3, 5),
        "input_shape": (64, 20),
        "block_widths": (32, 64),
        "features": 48,
        "seq": 24,
        "padding": (0, 2),
    }


def test_one_name_of_a_chain_is_set_alone(tmp_path):
    task = shapes_task(tmp_path, {"height": 32})
    ns = task_namespace(task)
    assert (ns["height"], ns["width"]) == (32, 40)
    assert ns["get_inputs"]()[0].shape == (8, 3, 32, 40)
    assert task.sizes["height"] == 32 and task.hash != shapes_task(tmp_path).hash


@pytest.mark.parametrize("value", ["4,6", " (4, 6) ", "[4,6]", (4, 6), [4, 6]])
def test_a_tuple_constant_takes_any_spelling_of_a_tuple(tmp_path, value):
    task = shapes_task(tmp_path, {"kernel_size": value})
    assert task.overrides == {"kernel_size": (4, 6)}
    ns = task_namespace(task)
    assert ns["kernel_size"] == (4, 6) and isinstance(ns["block_widths"], list)
    assert task.hash == shapes_task(tmp_path, {"kernel_size": (4, 6)}).hash


def test_a_list_constant_stays_a_list_and_a_one_tuple_takes_one_value(tmp_path):
    text = SHAPES.replace("input_shape = (64, 20)", "input_shape = (64,)").replace(
        "*input_shape[1:], ", ""
    )
    task = load_task(write(tmp_path, text), {"input_shape": "50", "block_widths": "16,8"})
    assert task.overrides == {"input_shape": (50,), "block_widths": (16, 8)}
    ns = task_namespace(task)
    assert ns["input_shape"] == (50,) and ns["block_widths"] == [16, 8]


@pytest.mark.parametrize(
    "value, why",
    [
        ("3", "a tuple of 2"),
        ("3,5,7", "a tuple of 2"),
        ("3,x", "a tuple of 2"),
        ((3, -1), "non-neg"),
    ],
)
def test_a_tuple_of_the_wrong_length_or_values_is_refused(tmp_path, value, why):
    with pytest.raises(TaskError, match=rf"--shape kernel_size=.*{why}.*kernel_size=3,5$"):
        shapes_task(tmp_path, {"kernel_size": value})


def test_a_derived_constant_is_refused_naming_what_it_follows(tmp_path):
    with pytest.raises(TaskError, match=r"dim is computed from features .*`dim = features \* 2`"):
        shapes_task(tmp_path, {"dim": 10})
    with pytest.raises(TaskError, match=r"bias_shape is computed from channels"):
        shapes_task(tmp_path, {"bias_shape": "3,1,1"})
    ns = task_namespace(shapes_task(tmp_path, {"features": 10}))
    assert ns["dim"] == 20  # the derived one follows


def test_parse_size_spellings():
    assert parse_size("64") == 64 and parse_size(" 64 ") == 64
    assert parse_size("3,5") == parse_size("(3, 5)") == parse_size("[3,5]") == (3, 5)
    assert parse_size("4096,") == parse_size("(4096,)") == (4096,)
    for bad in ("", "3,,5", "(3", "x", "1.5", "()"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_the_command_line_and_environment_spell_tuples_with_commas():
    import argparse

    from kernelwright import cli
    from kernelwright.run.config import parse_shapes

    assert cli._shape("kernel_size=3,5") == ("kernel_size", (3, 5))
    assert cli._shape("height=32") == ("height", 32)
    with pytest.raises(argparse.ArgumentTypeError, match="tuple of integers"):
        cli._shape("height=tall")
    # (A bare 4096 for a 1-tuple constant is made one by the task: Task's canonical form.)
    assert parse_shapes("N=64,kernel_size=3,5,input_shape=4096") == {
        "N": 64,
        "kernel_size": (3, 5),
        "input_shape": 4096,
    }
    with pytest.raises(ValueError, match="not NAME=VALUE"):
        parse_shapes("3,N=64")


def test_every_size_of_every_constant_moves_in_the_first_variant(tmp_path):
    task = shapes_task(tmp_path)
    first = variant_overrides(task)[0]
    assert first["height"] != 40 and first["width"] != 40
    assert all(a != b for a, b in zip(first["kernel_size"], (3, 5)))
    assert all(a != b for a, b in zip(first["input_shape"], (64, 20)))
    assert all(a != b for a, b in zip(first["block_widths"], (32, 64)))
    assert first["padding"][0] == 0 and first["padding"][1] != 2  # a 0 is no size
    for name in ("batch_size", "channels", "features", "seq"):
        assert first[name] != task.sizes[name], name
    ns = task_namespace(task, first)
    assert ns["dim"] == 2 * first["features"]
    note = variant_note(task, first)
    assert "not varied" not in note and "varied: batch_size, height, width, channels" in note


def test_tuple_constants_shrink_element_by_element(tmp_path):
    text = SHAPES.replace("input_shape = (64, 20)", "input_shape = (4096, 20)").replace(
        "seq = 24", "seq = 512"
    )
    task = load_task(write(tmp_path, text))
    sizes = shrink_overrides(task, 2**18)
    assert input_bytes(task, sizes) <= 2**18
    assert sizes["input_shape"][0] < 4096 and sizes["input_shape"][1] >= 16  # halved apart
    assert sizes["kernel_size"] == (3, 5) and sizes["padding"] == (0, 2)  # small ones kept


CONSTRAINED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, groups=groups)
        self.head = nn.Linear(64, 4)  # the width is pinned: the head reads 64 values

    def forward(self, x):
        return self.head(self.conv(x).mean(dim=2))

batch_size = 2
channels = 16
groups = 4
height = 12
width = 66

def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]

def get_init_inputs():
    return [channels, groups]
"""


def test_a_variant_moves_what_the_task_allows_and_names_what_it_kept(tmp_path):
    # The aggressive variant (channels 13, groups 3) breaks channels % groups; the 3/4 one keeps
    # it (12, 3) but leaves batch_size (2) and width (66) alone: width cannot move (the head
    # reads 64 columns), batch_size can and must.
    task = load_task(write(tmp_path, CONSTRAINED))
    first = variant_overrides(task)[0]
    assert first["channels"] % first["groups"] == 0
    assert first["batch_size"] != 2 and first["channels"] != 16 and first["height"] != 12
    ns = task_namespace(task, first)
    with torch.device("meta"):
        ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
    note = variant_note(
        task, first, ["batch_size=3, ...: RuntimeError: shapes cannot be multiplied"]
    )
    assert "varied: batch_size, channels, groups, height" in note
    assert "not varied: width" in note and "RuntimeError: shapes cannot" in note


# -- end to end: the evaluator on chained and tuple constants ------------------------------------

HONEST_COLUMN_SUM = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _column_sum_kernel(x_ptr, y_ptr, height, width, BLOCK: tl.constexpr):
    pid = tl.program_id(0)  # plane * width + column
    rows = tl.arange(0, BLOCK)
    idx = (pid // width) * height * width + rows * width + pid % width
    x = tl.load(x_ptr + idx, mask=rows < height, other=0.0)
    tl.store(y_ptr + pid, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        b, c, h, w = x.shape
        y = torch.empty((b, c, w), device=x.device, dtype=x.dtype)
        block = triton.next_power_of_2(h)
        _column_sum_kernel[(b * c * w,)](x, y, h, w, BLOCK=block)
        return y
"""

CHAINED = Path(__file__).parent / "tasks" / "chained_sizes.py"


@pytest.mark.slow
def test_the_evaluator_sets_one_name_of_a_chain_and_varies_both():
    from kernelwright.sandbox import EvalConfig, evaluate

    config = EvalConfig(shapes={"height": 32}, trials=1, drift_calls=1, timing=False)
    result = evaluate(CHAINED, HONEST_COLUMN_SUM, config)
    assert result.status == "ok", result.summary()
    assert result.shape_overrides == {"height": 32}
    shapes = result.correctness.shapes
    assert shapes[0]["height"] == 32 and shapes[0]["width"] == 24
    assert shapes[-1]["height"] not in (24, 32) and shapes[-1]["width"] != 24
    note = result.correctness.variant_note
    assert "varied: batch_size, channels, height, width)" in note, note
