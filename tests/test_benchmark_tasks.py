"""The benchmark suite's tasks: each loads, runs at tiny sizes on CPU, and documents its costs.

Every task under benchmarks/level*/ is executed with its module-level size constants shrunk
(through the AST, the way `--shape NAME=V` overrides them), built, run once on CPU, and checked
for a finite output of the shape its docstring documents. Its header's byte count is checked
against the tensors it really reads and writes at the default sizes (counted on the meta
device, so nothing is allocated), and its roofline floor against that count.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parent.parent
TASK_FILES = sorted((ROOT / "benchmarks").glob("level*/[0-9]*.py"))
TASK_IDS = [f"{p.parent.name}/{p.stem}" for p in TASK_FILES]

# Tiny sizes keep every task's inputs under ~100k elements (0.4 MB in fp32) on the CPU.
MAX_TINY_INPUT_ELEMENTS = 100_000
# Everything a tiny forward allocates (inputs, parameters and every op's outputs) stays under it.
MAX_TINY_ALLOCATED_BYTES = 100 * 2**20
# The H200 ceilings the headers divide by (brief: measured copy 4.25 TB/s; fp32 SIMT ~60 TFLOP/s).
H200_BYTES_PER_S = 4.25e12
H200_FP32_FLOP_PER_S = 60e12
# A header's byte count must match the tensors counted here within 5% (rounding to 3 digits,
# and buffers such as running statistics, which the header may count once or twice).
BYTES_TOLERANCE = 0.05
UNIT = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def task_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def size_constants(tree: ast.Module) -> dict[str, int]:
    """Module-level `NAME = <int>` assignments: the sizes `--shape NAME=V` can change."""
    sizes = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            sizes[node.targets[0].id] = node.value.value
    return sizes


def task_namespace(path: Path, sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """The task module executed with its size constants replaced by `sizes`."""
    tree = task_tree(path)
    defaults = size_constants(tree)
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if sizes and name in sizes and name in defaults:
                node.value = ast.copy_location(ast.Constant(sizes[name]), node.value)
    ns: dict[str, Any] = {"__name__": f"benchmark_task_{path.stem}", "__file__": str(path)}
    exec(compile(tree, str(path), "exec"), ns)
    return ns


def tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    return []


def input_elements(path: Path, sizes: dict[str, int]) -> int:
    """How many elements get_inputs() makes at `sizes`, counted on the meta device."""
    ns = task_namespace(path, sizes)
    with torch.device("meta"):
        return sum(t.numel() for t in tensors_in(ns["get_inputs"]()))


def tiny_sizes(path: Path) -> dict[str, int]:
    """Every size constant capped, the cap halved until the inputs fit the tiny budget."""
    defaults = size_constants(task_tree(path))
    for cap in (16, 8, 4, 2):
        sizes = {name: min(value, cap) for name, value in defaults.items()}
        if input_elements(path, sizes) <= MAX_TINY_INPUT_ELEMENTS:
            return sizes
    raise AssertionError(f"{path.name}: no generic shrink fits {MAX_TINY_INPUT_ELEMENTS} elements")


def documented_shape(ns: dict[str, Any]) -> tuple[int, ...]:
    """The `Output shape: (...)` that ends Model's docstring, evaluated in the task's namespace."""
    doc = inspect.getdoc(ns["Model"]) or ""
    _, marker, expression = doc.partition("Output shape:")
    assert marker, "Model's docstring must end with `Output shape: (<expression in sizes>)`"
    return tuple(eval(expression.strip(), dict(ns)))


class AllocatedBytes(TorchDispatchMode):
    """Adds up the bytes of every tensor any op returns: an upper bound on what was allocated."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.total += sum(t.numel() * t.element_size() for t in tensors_in(out))
        return out


def header_comment(path: Path) -> str:
    """The comment lines before the first import, joined into one line of prose."""
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith(("import ", "from ")):
            break
        if line.startswith("#"):
            lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def header_counts(path: Path) -> tuple[float, float, float]:
    """(bytes, FLOPs, floor in ms) as the task's header states them."""
    header = header_comment(path)
    moved = re.search(r"([\d.]+) (GB|MB) per call", header)
    flops = re.search(r"([\d.]+) ([KMGT])FLOP\b", header)
    floor = re.search(r"H200 floor: ([\d.]+) ms", header)
    assert moved, "header must count bytes: '... : 1.07 GB per call'"
    assert flops, "header must count FLOPs: '... : 0.13 GFLOP'"
    assert floor, "header must give the roofline floor: 'H200 floor: 0.25 ms (...)'"
    return (
        float(moved.group(1)) * UNIT[moved.group(2)[0]],
        float(flops.group(1)) * UNIT[flops.group(2)],
        float(floor.group(1)),
    )


def default_counted_bytes(path: Path, out_itemsize: int) -> int:
    """Inputs + parameters + buffers + output at the default sizes, on the meta device."""
    ns = task_namespace(path)
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = tensors_in(ns["get_inputs"]())
    state = [*model.parameters(), *model.buffers()]
    out_bytes = math.prod(documented_shape(ns)) * out_itemsize
    return sum(t.numel() * t.element_size() for t in [*inputs, *state]) + out_bytes


def tiny_run(path: Path) -> tuple[dict[str, Any], torch.Tensor, int]:
    """(namespace, output, bytes allocated) of one forward at the tiny sizes."""
    ns = task_namespace(path, tiny_sizes(path))
    torch.manual_seed(0)
    with AllocatedBytes() as counter, torch.no_grad():
        model = ns["Model"](*ns["get_init_inputs"]())
        out = model(*ns["get_inputs"]())
    return ns, out, counter.total


def test_suite_size_and_index():
    level1 = [p for p in TASK_FILES if p.parent.name == "level1"]
    level2 = [p for p in TASK_FILES if p.parent.name == "level2"]
    assert len(TASK_FILES) >= 40 and len(level2) >= 12, (len(level1), len(level2))
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    listed = set(re.findall(r"`(level\d/[0-9]\w*\.py)`", readme))
    on_disk = {f"{p.parent.name}/{p.name}" for p in TASK_FILES}
    assert listed == on_disk, {"missing": on_disk - listed, "stale": listed - on_disk}


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_IDS)
def test_task_runs_at_tiny_sizes(path: Path):
    ns, out, allocated = tiny_run(path)
    assert type(out) is torch.Tensor, f"forward returned {type(out).__name__}"
    assert tuple(out.shape) == documented_shape(ns)
    if out.is_floating_point():
        assert torch.isfinite(out).all(), "non-finite output at tiny sizes"
        assert out.dtype == torch.float32, "tasks stay float32; the evaluator's --dtype casts"
    assert allocated <= MAX_TINY_ALLOCATED_BYTES, f"{allocated / 2**20:.0f} MB at tiny sizes"


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_IDS)
def test_header_counts_match_the_task(path: Path):
    stated_bytes, stated_flops, floor_ms = header_counts(path)
    _, out, _ = tiny_run(path)
    counted = default_counted_bytes(path, out.element_size())
    assert abs(stated_bytes - counted) <= BYTES_TOLERANCE * counted, (
        f"header says {stated_bytes / 1e9:.3f} GB, inputs+params+output are {counted / 1e9:.3f} GB"
    )
    expected_ms = 1e3 * max(stated_bytes / H200_BYTES_PER_S, stated_flops / H200_FP32_FLOP_PER_S)
    assert abs(floor_ms - expected_ms) <= 0.1 * expected_ms + 0.005, (floor_ms, expected_ms)
    # Sized for an H200: past launch overhead (~5 us), far past the 60 MB L2.
    assert stated_bytes >= 150e6 and stated_bytes <= 5e9, stated_bytes


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_IDS)
def test_default_shape_is_documented(path: Path):
    """At the default sizes (meta device) the output has the documented shape."""
    ns = task_namespace(path)
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = ns["get_inputs"]()
        try:
            out = model(*inputs)
        except (NotImplementedError, RuntimeError) as exc:
            # Data-dependent control flow cannot run on meta tensors (no values to branch on).
            assert "meta" in str(exc).lower() or "data-dependent" in str(exc).lower(), exc
            pytest.skip(f"forward needs real values: {exc}")
    assert tuple(out.shape) == documented_shape(ns)


def function_nodes(tree: ast.Module) -> dict[str, ast.AST]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        and node.name in ("Model", "get_inputs", "get_init_inputs")
    }


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_IDS)
def test_sizes_are_module_constants(path: Path):
    tree = task_tree(path)
    sizes = size_constants(tree)
    nodes = function_nodes(tree)
    assert set(nodes) == {"Model", "get_inputs", "get_init_inputs"}
    assert ast.get_docstring(nodes["Model"]), "Model needs a docstring"
    assert sizes, "a task needs at least one size constant"
    used = {
        n.id
        for name in ("get_inputs", "get_init_inputs")
        for n in ast.walk(nodes[name])
        if isinstance(n, ast.Name)
    }
    assert not set(sizes) - used, (
        f"size constants unused by get_inputs/get_init_inputs: {set(sizes) - used}"
    )
    # A literal bigger than a dim index or a small factor would be a size hidden from --shape.
    hidden = [
        (n.lineno, n.value)
        for node in nodes.values()
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and type(n.value) is int and abs(n.value) > 3
    ]
    assert not hidden, f"int literals in Model/get_inputs/get_init_inputs: {hidden}"


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_IDS)
def test_model_reads_no_module_globals(path: Path):
    """Model gets every constant through its constructor, so ModelNew gets the same values."""
    tree = task_tree(path)
    module_names = {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    model = function_nodes(tree)["Model"]
    for fn in (n for n in ast.walk(model) if isinstance(n, ast.FunctionDef)):
        local = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]}
        local |= {
            n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        reads = {
            n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        assert not (reads & module_names) - local, (
            f"{fn.name} reads {(reads & module_names) - local}"
        )


def sandbox_task_module():
    """sandbox/task/ when it exists with the shrink and variant helpers, else a skip."""
    try:
        module = importlib.import_module("kernelwright.sandbox.task")
    except ImportError as exc:
        pytest.skip(f"kernelwright.sandbox.task not importable: {exc}")
    needed = ("load_task", "shrink_overrides", "variant_overrides", "task_namespace")
    needed += ("build_reference", "build_inputs")
    if not all(hasattr(module, name) for name in needed):
        pytest.skip("sandbox/task/ lacks one of " + ", ".join(needed))
    return module


def reference_output(tm, task) -> torch.Tensor:
    """The evaluator's own reference (parameters re-drawn) on its own inputs, on CPU."""
    ns = tm.task_namespace(task)
    model = tm.build_reference(ns, "fp32", "cpu", seed=0)
    with torch.no_grad():
        return model(*tm.build_inputs(ns, "fp32", "cpu", seed=1))


# The evaluator shrinks tasks for the interpreter to ~100k fp32 elements of inputs + parameters.
SANDBOX_BUDGET_BYTES = 4 * MAX_TINY_INPUT_ELEMENTS


# A variant moves kernel_size 3 -> 2; torch warns that "same" padding then copies the input.
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_IDS)
def test_sandbox_shrink_and_variant(path: Path):
    """The evaluator's own shrink fits the budget, and its first workable shape variant runs."""
    tm = sandbox_task_module()
    task = tm.load_task(path)
    assert set(task.constants) == set(size_constants(task_tree(path))), "size heuristics differ"
    shrunk = tm.load_task(path, tm.shrink_overrides(task, SANDBOX_BUDGET_BYTES))
    ns = tm.task_namespace(shrunk)
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
        held = [*tensors_in(ns["get_inputs"]()), *model.parameters(), *model.buffers()]
    nbytes = sum(t.numel() * t.element_size() for t in held)
    assert nbytes <= SANDBOX_BUDGET_BYTES, f"{shrunk.sizes}: {nbytes} bytes of inputs + parameters"
    out = reference_output(tm, shrunk)
    assert torch.isfinite(out.double()).all() and tuple(out.shape) == documented_shape(ns)
    failures = []
    for sizes in tm.variant_overrides(shrunk):
        try:
            variant = tm.load_task(path, sizes)
            out = reference_output(tm, variant)
        except (RuntimeError, ValueError, tm.TaskError) as exc:
            failures.append(f"{sizes}: {str(exc).splitlines()[0]}")
            continue
        assert torch.isfinite(out.double()).all(), sizes
        assert tuple(out.shape) == documented_shape(tm.task_namespace(variant)), sizes
        # Tasks here have no constraints between constants: the first variant, which moves
        # every constant, must be the one that works.
        assert not failures, failures
        return
    pytest.fail(f"the reference runs at no shape variant: {failures}")
