"""The few-shot examples in prompts/examples/ are honest kernels the evaluator must accept.

Each example is checked twice: directly (same parameters in Model and ModelNew, fp32 and fp16,
awkward and non-contiguous inputs, every `# tune:` value) and through the real evaluator, which
must return "ok" (a rejection here is a false positive in the evaluator or a bug in the example).
"""

from __future__ import annotations

import copy
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tests" / "tasks"
EXAMPLES = ROOT / "prompts" / "examples"
NAMES = ["softmax", "layernorm", "matmul_bias_gelu", "conv_bias_relu", "sum_reduce", "gelu"]

# Size overrides per task that no power of two divides: every mask and loop tail is exercised.
AWKWARD = {
    "softmax": {"batch_size": 37, "dim": 131},
    "layernorm": {"batch_size": 3, "seq_len": 5, "hidden": 131},
    "matmul_bias_gelu": {"batch_size": 37, "in_features": 131, "out_features": 19},
    "conv_bias_relu": {
        "batch_size": 3,
        "in_channels": 5,
        "out_channels": 7,
        "height": 23,
        "width": 29,
        "kernel_size": 4,
    },
    "sum_reduce": {"batch_size": 3, "dim1": 131, "dim2": 37},
    "gelu": {"batch_size": 37, "dim": 131},
}
# Past one block: rows longer than the largest column block (4096) so the column loops repeat,
# more than GROUP_M (8) row tiles for the matmul, planes wider than one block for the conv.
LARGE = {
    "softmax": {"batch_size": 3, "dim": 9001},
    "layernorm": {"batch_size": 1, "seq_len": 3, "hidden": 9001},
    "matmul_bias_gelu": {"batch_size": 600, "in_features": 40, "out_features": 150},
    "conv_bias_relu": {"height": 40, "width": 50},
    "sum_reduce": {"batch_size": 1, "dim1": 9001, "dim2": 3},
    "gelu": {"batch_size": 3, "dim": 9001},
}
SIZES = {"default": {name: {} for name in NAMES}, "awkward": AWKWARD, "large": LARGE}
# Where the direct checks run: the GPU when there is one (the interpreter only runs without CUDA).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# fp32: DESIGN.md's 1e-4, which TF32 or fp16 compute would not meet, plus the float64 check.
# fp16: one fp16 ulp at |x| ~ 8 is 2**-7; outputs here stay below ~64. bf16 (GPU only): 8
# mantissa bits, so one ulp at |x| ~ 8 is 2**-4 and a rounding-order difference reaches it.
TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (3e-2, 1e-2),
    torch.bfloat16: (1e-1, 2e-2),
}
# The candidate's error against float64 may be this many times eager PyTorch's own, or the floor
# (one fp32 rounding of every element is ~6e-8 relative). The Triton interpreter's reductions are
# sequential numpy sums, so a tree reduction on the GPU is more accurate than measured here.
PRECISION_FACTOR = 4.0
PRECISION_FLOOR = 2e-7


def load_module(path: Path, tag: str = "") -> ModuleType:
    """A fresh module object executed from `path` (its @triton.jit kernels are defined anew)."""
    name = f"_kw_test_{path.parent.name}_{path.stem}{tag}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def examples() -> dict[str, ModuleType]:
    return {name: load_module(EXAMPLES / f"{name}.py") for name in NAMES}


def task_module(name: str, sizes: dict[str, int] | None = None) -> ModuleType:
    """The task module with size constants overridden (get_inputs reads them at call time)."""
    task = load_module(TASKS / f"{name}.py", tag="_task")
    for key, value in (sizes or {}).items():
        assert isinstance(getattr(task, key), int), f"{name}.{key} is not a size constant"
        setattr(task, key, value)
    return task


def model_pair(task: ModuleType, example: ModuleType, init: list | None = None, seed: int = 0):
    """Model and ModelNew with the same, randomly re-drawn parameters (never the defaults)."""
    init = task.get_init_inputs() if init is None else init
    torch.manual_seed(seed)
    ref = task.Model(*init)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + 0.1)
    new = example.ModelNew(*init)
    new.load_state_dict(ref.state_dict())
    return ref.eval(), new.eval()


def rel_error(out: torch.Tensor, ref64: torch.Tensor) -> float:
    return ((out.double() - ref64).norm() / ref64.norm().clamp_min(1e-30)).item()


def assert_matches(
    ref, new, inputs: list, dtype: torch.dtype = torch.float32, device: str = DEVICE
) -> None:
    """ModelNew's output equals Model's within `dtype`'s tolerance and is as precise as eager."""
    ref64 = copy.deepcopy(ref).to(device=device, dtype=torch.float64)
    ref, new = ref.to(device=device, dtype=dtype), new.to(device=device, dtype=dtype)
    inputs = [x.to(device=device, dtype=dtype) if x.is_floating_point() else x for x in inputs]
    pristine = [x.clone() for x in inputs]
    with torch.no_grad():
        out = new(*inputs)
        out_again = new(*inputs)
        expected = ref(*pristine)
        expected64 = ref64(*[x.double() for x in pristine])
    for x, x0 in zip(inputs, pristine):
        assert torch.equal(x, x0), "the example modified its input"
    assert type(out) is torch.Tensor
    assert out.dtype == dtype and out.shape == expected.shape and out.device == expected.device
    assert out.data_ptr() != out_again.data_ptr(), "output storage reused across calls"
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(out, expected, atol=atol, rtol=rtol)
    if dtype == torch.float32:
        err, eager = rel_error(out, expected64), rel_error(expected, expected64)
        assert err <= max(PRECISION_FACTOR * eager, PRECISION_FLOOR), (err, eager)


def permuted(x: torch.Tensor) -> torch.Tensor:
    """The same values with every dimension's stride reversed (a transposed memory layout)."""
    order = list(range(x.dim()))[::-1]
    return x.permute(order).contiguous().permute(order)


def sliced(x: torch.Tensor) -> torch.Tensor:
    """The same values as a slice of a wider tensor: rows are padded, the last dim has stride 1."""
    wide = torch.full(
        (*x.shape[:-1], x.shape[-1] + 5), float("nan"), dtype=x.dtype, device=x.device
    )
    wide[..., : x.shape[-1]] = x
    return wide[..., : x.shape[-1]]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sizes", list(SIZES))
def test_example_matches_model(examples, name: str, sizes: str) -> None:
    task = task_module(name, SIZES[sizes][name])
    ref, new = model_pair(task, examples[name])
    torch.manual_seed(1)
    assert_matches(ref, new, task.get_inputs())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", [permuted, sliced], ids=["permuted", "sliced"])
def test_example_takes_non_contiguous_inputs(
    examples, name: str, layout: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    task = task_module(name, AWKWARD[name])
    ref, new = model_pair(task, examples[name])
    torch.manual_seed(2)
    inputs = [layout(x.to(DEVICE)) for x in task.get_inputs()]
    assert not inputs[0].is_contiguous()
    assert_matches(ref, new, inputs)


@pytest.mark.parametrize("name", NAMES)
def test_example_fp16(examples, name: str) -> None:
    task = task_module(name, AWKWARD[name])
    ref, new = model_pair(task, examples[name])
    torch.manual_seed(3)
    assert_matches(ref, new, task.get_inputs(), dtype=torch.float16)


@pytest.mark.parametrize("dim", [0, 2, -1])
def test_sum_reduce_any_dim(examples, dim: int) -> None:
    # Few rows: reducing the last dimension launches one program per output element.
    task = task_module("sum_reduce", {"batch_size": 3, "dim1": 11, "dim2": 37})
    ref, new = model_pair(task, examples["sum_reduce"], init=[dim])
    torch.manual_seed(4)
    assert_matches(ref, new, task.get_inputs())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_sum_reduce_splits_long_reductions(examples, dtype: torch.dtype) -> None:
    """One output tile over 9001 rows: the rows are split, partial sums added by a 2nd launch."""
    sizes = LARGE["sum_reduce"]
    example = examples["sum_reduce"]
    assert example.rows_per_split(sizes["batch_size"], sizes["dim1"], sizes["dim2"]) < sizes["dim1"]
    task = task_module("sum_reduce", sizes)
    ref, new = model_pair(task, example)
    torch.manual_seed(7)
    assert_matches(ref, new, task.get_inputs(), dtype=dtype)


def tune_constants(source: str) -> dict[str, list[int]]:
    """`NAME = v  # tune: a, b, c` lines of an example: the values a sweep may set."""
    pattern = re.compile(r"^([A-Z_][A-Z0-9_]*) = (\d+)  # tune: ([\d, ]+)$", re.MULTILINE)
    return {m[1]: [int(v) for v in m[3].split(",")] for m in pattern.finditer(source)}


def test_every_example_has_tune_constants() -> None:
    for name in NAMES:
        source = (EXAMPLES / f"{name}.py").read_text()
        constants = tune_constants(source)
        assert constants, f"{name}.py has no `# tune:` constant"
        for key, values in constants.items():
            default = int(re.search(rf"^{key} = (\d+)", source, re.MULTILINE)[1])
            assert default in values, f"{name}.py: {key}'s default {default} is not in its list"


@pytest.mark.parametrize("name", NAMES)
def test_every_tune_value_is_correct(name: str) -> None:
    """A sweep may pick any listed value: each one, alone, must give the right answer."""
    example = load_module(EXAMPLES / f"{name}.py", tag="_tune")
    task = task_module(name, AWKWARD[name])
    ref, new = model_pair(task, example)
    torch.manual_seed(5)
    inputs = task.get_inputs()
    for key, values in tune_constants((EXAMPLES / f"{name}.py").read_text()).items():
        default = getattr(example, key)
        for value in values:
            setattr(example, key, value)
            assert_matches(ref, new, inputs)
        setattr(example, key, default)


# -- through the evaluator ----------------------------------------------------------------------
# Every example in fp32, fp16 and bf16 (tritoncompat gives the interpreter the GPU's bf16).
EVAL_DTYPES = ("fp32", "fp16", "bf16")
EVALUATIONS = [(name, dtype) for name in NAMES for dtype in EVAL_DTYPES]


@pytest.fixture(scope="module")
def pool():
    from kernelwright.sandbox import EvalPool

    with EvalPool() as p:
        yield p


@pytest.fixture(scope="module")
def verdicts(pool):
    """Every evaluation submitted at once, so the pool's workers run them side by side."""
    from kernelwright.sandbox import EvalConfig

    return {
        (name, dtype): pool.submit(
            TASKS / f"{name}.py", (EXAMPLES / f"{name}.py").read_text(), EvalConfig(dtype=dtype)
        )
        for name, dtype in EVALUATIONS
    }


@pytest.mark.parametrize(("name", "dtype"), EVALUATIONS)
@pytest.mark.slow
def test_evaluator_accepts_example(verdicts, name: str, dtype: str) -> None:
    result = verdicts[name, dtype].result()
    assert result.status == "ok", f"{name} ({dtype}): {result.summary()}\n{result.message}"
    assert result.correctness is not None and result.correctness.trials >= 1
    assert result.correctness.variant_checked, result.correctness.variant_note
    assert result.kernels, "no Triton launch recorded"


@pytest.mark.parametrize("name", NAMES)
def test_example_passes_static_checks(name: str) -> None:
    from kernelwright.sandbox.rules import format_violations
    from kernelwright.sandbox.static.check import static_check

    violations = static_check((EXAMPLES / f"{name}.py").read_text())
    assert not violations, format_violations(violations)


# -- on a GPU (compiled kernels, bf16, TF32-capable hardware) -------------------------------------
# Sizes in the range of the H200 benchmarks' smaller end: the launch heuristics' real branches
# (16 warps, full 128x128 tiles, many programs per SM) and fp32 dot products TF32 would spoil.
GPU_SIZES = {
    "softmax": {"batch_size": 4096, "dim": 4096},
    "layernorm": {"batch_size": 8, "seq_len": 512, "hidden": 4096},
    "matmul_bias_gelu": {"batch_size": 1024, "in_features": 2048, "out_features": 1536},
    "conv_bias_relu": {
        "batch_size": 16,
        "in_channels": 32,
        "out_channels": 64,
        "height": 66,
        "width": 66,
        "kernel_size": 3,
    },
    "sum_reduce": {"batch_size": 64, "dim1": 4096, "dim2": 256},
    "gelu": {"batch_size": 4096, "dim": 8192},
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_example_on_gpu(examples, name: str, dtype: torch.dtype) -> None:
    for sizes in (AWKWARD[name], LARGE[name], GPU_SIZES[name]):
        task = task_module(name, sizes)
        ref, new = model_pair(task, examples[name])
        torch.manual_seed(6)
        # Cast before the layout change: assert_matches' own cast would make a contiguous copy.
        inputs = [x.to(device="cuda", dtype=dtype) for x in task.get_inputs()]
        assert_matches(ref, new, inputs, dtype=dtype, device="cuda")
        for layout in (permuted, sliced):
            assert_matches(ref, new, [layout(x) for x in inputs], dtype=dtype, device="cuda")
    if name == "conv_bias_relu":  # cuDNN answers channels_last inputs with channels_last output
        x = inputs[0].contiguous(memory_format=torch.channels_last)
        assert_matches(ref, new, [x], dtype=dtype, device="cuda")
