"""generate(): a task in, a candidate file (or the honest reason there is none) out."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..sandbox.contract import torch_dtypes
from ..sandbox.static.pyparse import serialised
from ..sandbox.task import Task, load_task, task_namespace, variant_overrides
from . import attention, loops, ops, recurrent
from .arguments import Argument, check_lines, fixed_arguments, moved
from .assemble import assemble
from .gather import fuse_gathers
from .group_writer import Emitted, GroupWriter
from .ir import Graph, Node
from .kernel_conv import write_conv
from .kernel_matmul import write_matmul
from .kernel_pointwise import write_pointwise
from .kernel_row import write_row
from .kernel_row_split import takes_split
from .kernel_split import write_split
from .layout import in_memory_order
from .normalize import normalize
from .partition import CONV, MATMUL, POINTWISE, ROW, SPLIT, Group, partition
from .pyforward import ForwardWriter, forward_args, init_source
from .symbolic import ambiguous, bind_constants, separates
from .trace import build_model, propagate, trace
from .tunables import TUNABLES
from .unsupported import Unsupported

DTYPES = torch_dtypes()
# Moving the constructor arguments costs two more builds of the model; past this many seconds
# for one build (level-3 recurrent models on meta tensors), they are checked instead.
MOVED_ARGUMENTS_MAX_S = 10.0
WRITERS = {
    POINTWISE: write_pointwise,
    ROW: write_row,
    SPLIT: write_split,
    MATMUL: write_matmul,
    CONV: write_conv,
}


@dataclass(frozen=True)
class FusionResult:
    """What the codegen made of one task: the candidate file, or the reason there is none."""

    source: str | None
    reason: str
    groups: tuple[str, ...] = ()
    tunables: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.source is not None


def generate(task: Task | str | Path, *, dtype: str = "fp32") -> FusionResult:
    """A candidate for `task` (a sandbox Task or a path), or None with the reason."""
    try:
        loaded = task if isinstance(task, Task) else load_task(task)  # as the evaluator loads it
        source, groups, tunables = _candidate(loaded, dtype)
    except Unsupported as e:
        return FusionResult(None, f"no offline candidate: {e}")
    except Exception as e:  # a codegen bug must not end the run: report it as the reason
        where = traceback.extract_tb(e.__traceback__)[-1]
        return FusionResult(
            None,
            f"no offline candidate: internal error in the fusion codegen ({type(e).__name__}: "
            f"{str(e)[:200]} at {Path(where.filename).name}:{where.lineno})",
        )
    names = ", ".join(groups)
    return FusionResult(
        source,
        f"{len(groups)} fused group(s): {names}",
        tuple(groups),
        {t: TUNABLES[t].choices for t in tunables},
    )


def _candidate(task: Task, dtype: str) -> tuple[str, list[str], list[str]]:
    ns = _namespace(task, None)
    args = fixed_arguments(task, ns)
    started = time.monotonic()
    variant = _variant(task)
    if args and time.monotonic() - started < MOVED_ARGUMENTS_MAX_S:
        # Constructor arguments read at run time where they bind: all of them, else the floats
        # (scales, clamps, epsilons) with the flags and axes checked at construction.
        floats = [a for a in args if type(a.value) is float]
        for moving in (args, floats) if floats != args else (args,):
            if moving:
                fixed = [a for a in args if a not in moving]
                got = _moved_candidate(task, dtype, ns, variant, moving, fixed)
                if got is not None:
                    return got
    checks = check_lines(args)
    graphs, model = _graphs(task, ns)
    if variant is not None:
        tie = _tie_breaker(task, model, variant)
        _same_fusions(graphs, tie)
        for mode in graphs:
            bind_constants(graphs[mode], variant[0][mode], model, variant[1], _mode(tie, mode))
    splits: list[bool] = []
    text, groups, tunables = _render(task, graphs, dtype, checks, splits)
    if variant is not None and all(_ops(graphs[m]) == _ops(variant[0][m]) for m in graphs):
        # The candidate written at another size must be the same text: no traced size leaked.
        # (A variant across a size-picked strategy, group norm's split path past
        # GROUP_SPLIT_ELEMENTS, traces to other nodes: its text differs by design.)
        other, _, _ = _render(task, variant[0], dtype, checks, splits, replay=True)
        if other != text:
            raise Unsupported(
                "forward uses a size that depends on the task's constants in a way the codegen "
                f"cannot express at run time (the candidate differs at {variant[2]})"
            )
    return text, groups, tunables


def _moved_candidate(
    task: Task,
    dtype: str,
    ns: dict[str, Any],
    variant: tuple[dict[str, Graph], Any, dict] | None,
    moving: list[Argument],
    fixed: list[Argument],
) -> tuple[str, list[str], list[str]] | None:
    """The candidate with `moving` read at run time and `fixed` checked at construction, or
    None when a moved argument changes the candidate (it cannot be read at run time).

    The second build moves the arguments and, where the task has a variant, its sizes too:
    one comparison binds both to the attributes that hold them.
    """
    overrides = variant[2] if variant is not None else {}
    try:
        other, other_model = _graphs(task, moved(_namespace(task, overrides), moving))
    except Unsupported:
        return None
    graphs, model = _graphs(task, ns)  # fresh: binding rewrites both
    if not all(_ops(graphs[m]) == _ops(other[m]) for m in graphs):
        return None
    checks = check_lines(fixed)
    tie = _tie_breaker(task, model, (other, other_model, overrides)) if variant else None
    _same_fusions(graphs, tie)
    try:
        for mode in graphs:
            bind_constants(graphs[mode], other[mode], model, other_model, _mode(tie, mode))
        splits: list[bool] = []
        text, groups, tunables = _render(task, graphs, dtype, checks, splits)
        if _render(task, other, dtype, checks, splits, replay=True)[0] != text:
            return None
    except Exception:  # a read where the partition wants a constant (batch norm's momentum
        return None  # inside its running-stats update): the argument stays a checked constant
    return text, groups, tunables


def _ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


def _variant(task: Task) -> tuple[dict[str, Graph], Any, dict] | None:
    """The graphs at the first of the sandbox's "other shape" sizes the task builds at."""
    for overrides in variant_overrides(task)[:3]:
        try:
            graphs, model = _graphs(task, task_namespace(task, overrides))
        except Exception:
            continue
        return graphs, model, overrides
    return None


def _tie_breaker(
    task: Task, model: Any, variant: tuple[dict[str, Graph], Any, dict]
) -> tuple[dict[str, Graph], Any] | None:
    """The graphs at sizes where attributes equal to one another at both the task's and the
    variant's sizes differ (symbolic.bind_constants reads the one the constant came from), or
    None when no attributes are equal so or no sizes tried separate them (one quantity)."""
    groups = ambiguous(model, variant[1])
    if not groups:
        return None
    for overrides in variant_overrides(task):  # each one built on meta (cheap), one traced
        if overrides == variant[2]:
            continue
        try:
            ns = task_namespace(task, overrides)
            with serialised():
                built, _ = build_model(ns, torch.float32)
            if not separates(built, groups):
                continue
            return _graphs(task, ns)
        except Exception:
            continue
    return None


def _same_fusions(graphs: dict[str, Graph], tie: tuple[dict[str, Graph], Any] | None) -> None:
    """Unsupported when the groups fused at the task's sizes are not those fused where its
    equal sizes differ (a row reduced over one size and broadcast over the other fuses only
    where they are equal: that kernel would be wrong at every other size)."""
    if tie is None:
        return

    def fusions(graph: Graph) -> list[tuple[str, tuple[str, ...]]]:
        return [(g.kind, tuple(n.op for n in g.nodes)) for g in partition(graph)]  # reads only

    for mode, graph in graphs.items():
        if mode not in tie[0]:
            continue
        try:
            other = fusions(tie[0][mode])
        except Exception:  # the tie's sizes partition otherwise at all: nothing to compare
            continue
        if fusions(graph) != other:
            raise Unsupported(
                "a fusion holds only where two of the task's sizes are equal (they are at the "
                "task's sizes and at the variant's, not in general)"
            )


def _mode(tie: tuple[dict[str, Graph], Any] | None, mode: str) -> tuple[Graph, Any] | None:
    return (tie[0][mode], tie[1]) if tie is not None and mode in tie[0] else None


def _namespace(task: Task, overrides: dict[str, int] | None) -> dict[str, Any]:
    try:
        return task_namespace(task, overrides or {})
    except Exception as e:
        raise Unsupported(f"the task does not load: {str(e).splitlines()[0][:200]}") from e


def _graphs(task: Task, ns: dict[str, Any]) -> tuple[dict[str, Graph], Any]:
    """The canonical graph of the model as constructed ("train": KernelBench calls it without
    .eval(), though a task may put a submodule in eval mode itself) and after .eval()."""
    with serialised():  # the first meta-tensor op imports torch._dynamo, which parses (pyparse)
        return _traced_graphs(task, ns)


def _traced_graphs(task: Task, ns: dict[str, Any]) -> tuple[dict[str, Graph], Any]:
    try:
        m32, in32 = build_model(ns, torch.float32)
        m16, in16 = build_model(ns, torch.float16)
    except Exception as e:
        raise Unsupported(f"Model cannot be built on the meta device: {_first(e)}") from e
    out: dict[str, Graph] = {}
    traced: dict[str, tuple[Any, Any, Any]] = {}
    for mode in ("train", "eval"):
        if mode == "eval":
            m32.eval()
            m16.eval()
        # The graphs' inputs: forward's, or those of the loop's step (loops.py).
        (gm32, s32), loop = _trace(task, m32, in32)
        (gm16, s16), _ = _trace(task, m16, in16)
        if gm32.meta["decisions"] != gm16.meta["decisions"]:
            # One candidate serves every dtype: a branch on the dtype cannot be baked in.
            raise Unsupported("forward branches on its inputs' dtype")
        info32 = propagate(gm32, s32, str(task.path))
        info16 = propagate(gm16, s16, str(task.path))
        if loop is not None:
            loops.check_state(loop, s32, _outputs_info(gm32, info32, loop))
        # Attention written out by hand becomes one call (codegen/attention.py's kernel).
        if attention.rewrite(gm32, info32) and attention.rewrite(gm16, info16):
            info32 = propagate(gm32, s32, str(task.path))
            info16 = propagate(gm16, s16, str(task.path))
        out[mode] = normalize(gm32, info32, info16)
        out[mode].loop = loop
        traced[mode] = (gm32, info32, info16)
    if all(_only_pooling(g) for g in out.values()):
        # Nothing to fuse but pooling: pooling itself as a Triton kernel (kernel_pool.py).
        # Elsewhere it stays torch's (cuDNN) until the two are timed against each other.
        loop = out["train"].loop
        out = {mode: normalize(*traced[mode], pools=True) for mode in out}
        for g in out.values():
            g.loop = loop
    return out, m32


def _trace(task: Task, model: Any, inputs: list[Any]) -> tuple[tuple[Any, list[Any]], Any]:
    """(fx graph, its inputs) of forward, and None; or, where a loop over a traced size
    stopped the tracer, those of the loop's step and the loop (loops.py)."""
    path = str(task.path)
    try:
        return (trace(model, path, inputs), inputs), None
    except Unsupported as e:
        loop = loops.find(task.source, e.lineno) if e.lineno is not None else None
        if loop is None:
            raise
        step_inputs = loops.step_inputs(model, loop, inputs, path)
        return (trace(loops.step_model(model, loop, path), path, step_inputs), step_inputs), loop


def _outputs_info(gm: Any, info: dict[str, Any], loop: Any) -> dict[str, Any]:
    """The traced shapes of the step's outputs by the names the step returns them as."""
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    names = [*loop.carried, *(o for _, o in loop.appends)]
    return {name: info.get(node.name) for name, node in zip(names, out) if hasattr(node, "name")}


# Kernels of their own for one torch call each (flash attention, a recurrent module): `mark`
# picks the calls of a graph they take, and the forward calls their helper in `source`.
WHOLE_CALLS = (attention, recurrent)

# The pooling modules a forward may consist of (their names as torch nodes of the graph).
POOLING = {f"{kind}pool{rank}d" for kind in ("max", "avg") for rank in (1, 2, 3)}


def _only_pooling(graph: Graph) -> bool:
    """Nothing of `graph` fuses, and some of what torch keeps is pooling."""
    torch_ops = {n.origin or n.op for n in graph.nodes if n.kind == "torch"}
    return bool(torch_ops & POOLING) and not partition(graph)


def _render(
    task: Task,
    graphs: dict[str, Graph],
    dtype: str,
    checks: list[str],
    splits: list[bool] | None = None,
    replay: bool = False,
) -> tuple[str, list[str], list[str]]:
    """The candidate's text. `splits`: whether each row group, in order, carries the split path
    for few long rows: decided from the traced sizes and appended, or with `replay` read back
    (a render at another size must give the same text, kernel_row_split.takes_split)."""
    splits = [] if splits is None else splits
    row_groups = 0
    init_lines, helper_classes, methods = init_source(task.source)
    init_lines = init_lines + checks
    loop = next(iter(graphs.values())).loop  # the graphs are a loop's step (loops.py)
    fwd_args = ["self", *loop.inputs] if loop is not None else forward_args(task.source)
    emitted: list[Emitted] = []
    bodies: dict[str, list[str]] = {}
    summaries: list[str] = []
    seen: dict[str, Emitted] = {}
    titles: set[str] = {kernel.TITLE for kernel in WHOLE_CALLS}
    used: list[Any] = []  # the modules of WHOLE_CALLS the forward calls, in order of first use
    for mode, graph in graphs.items():
        groups = partition(graph)
        fuse_gathers(graph, groups)
        calls: list[Node] = []
        for kernel in WHOLE_CALLS:
            found = kernel.mark(graph)
            if found and kernel not in used:
                summaries.append(kernel.summary(found))
                used.append(kernel)
            calls += found
        if not groups and not calls:
            raise Unsupported(f"nothing to fuse: forward is only {_torch_ops(graph)}")
        launchers: dict[int, tuple[str, list]] = {}
        # Convolutions with nothing fused after them and no other kernel: their torch path
        # would leave a forward that launches no kernel (kernel_conv.py).
        alone = not calls and all(g.kind == CONV and not _has_pointwise(g) for g in groups)
        for g in groups:
            split = False
            if g.kind == ROW:
                if not replay:
                    splits.append(takes_split(g.geometry))
                split = splits[row_groups] if row_groups < len(splits) else False
                row_groups += 1
            key = _structure(g, dtype, split, alone)
            if key in seen:  # the same group in both modes: one kernel
                e = seen[key]
            else:
                e = seen[key] = _emit(g, dtype, titles, split, alone)
                emitted.append(e)
                summaries.append(e.summary)
            launchers[id(g)] = (e.launcher, e.outputs)
        writer = ForwardWriter(graph, groups, launchers)
        bodies[mode] = writer.statements("        ")
    if loop is None:
        model_new = _model_new(init_lines + methods, fwd_args, bodies)
    else:
        forward = loops.forward_lines(loop, task.source)
        model_new = _model_new(init_lines + methods, fwd_args, bodies, loops.STEP, forward)
    helper_classes = [*(kernel.source() for kernel in used), *helper_classes]
    tunables = []
    for e in emitted:
        tunables += [t for t in e.tunables if t not in tunables]
    needs = [h for kernel in used for h in kernel.HELPERS]
    return assemble(emitted, helper_classes, model_new, dtype, needs), summaries, tunables


def _has_pointwise(g: Group) -> bool:
    return any(n.kind == "pw" for n in g.nodes)


def _emit(
    g: Group, dtype: str, titles: set[str], split: bool = False, alone: bool = False
) -> Emitted:
    titles.update(h.lstrip("_") for h in ops.HELPERS)  # launcher names must not shadow helpers
    base = _title(g)
    title, i = base, 2
    while title in titles:
        title, i = f"{base}_{i}", i + 1
    titles.add(title)
    return WRITERS[g.kind](GroupWriter(in_memory_order(g), title, dtype, split, alone))


def _structure(g: Group, dtype: str, split: bool = False, alone: bool = False) -> str:
    """The group's code under a fixed name: equal for the same group in train and eval mode."""
    e = WRITERS[g.kind](GroupWriter(in_memory_order(g), "group", dtype, split, alone))
    outs = ",".join(o.name for o in e.outputs)
    return outs + "\n" + "\n".join("\n".join(b) for b in e.blocks)


def _title(g: Group) -> str:
    labels: list[str] = []
    for n in g.nodes:
        label = "".join(c for c in (n.origin or n.op) if c.isalnum() or c == "_").strip("_")
        label = label.rstrip("0123456789").rstrip("_") or n.op
        if label not in labels:
            labels.append(label)
    return "_".join(labels[:4])[:48].lower() or g.kind


def _model_new(
    init: list[str],
    args: list[str],
    bodies: dict[str, list[str]],
    name: str = "forward",
    forward: list[str] | None = None,
) -> list[str]:
    """ModelNew: `init`, then the method `name` with the graphs' bodies (train and eval), and
    `forward` as written when `name` is another method (a loop's step) that it calls."""
    sig = ", ".join(args)
    lines = [
        "class ModelNew(nn.Module):",
        '    """The task\'s model with its forward fused into Triton kernels."""',
        "",
    ]
    lines += init
    if forward is not None:
        lines += ["", *forward]
    if bodies["train"] == bodies["eval"]:
        lines += ["", f"    def {name}({sig}):"] + bodies["train"]
        return lines
    call_args = ", ".join(a.partition("=")[0] for a in args[1:])
    prefix = "_forward" if name == "forward" else name
    lines += [
        "",
        f"    def {name}({sig}):",
        "        # Train and eval mode compute differently (batch statistics vs running ones).",
        "        if self.training:",
        f"            return self.{prefix}_train({call_args})",
        f"        return self.{prefix}_eval({call_args})",
        "",
        f"    def {prefix}_train({sig}):",
        *bodies["train"],
        "",
        f"    def {prefix}_eval({sig}):",
        *bodies["eval"],
    ]
    return lines


def _torch_ops(graph: Graph) -> str:
    names = [n.origin or n.op for n in graph.nodes if n.kind == "torch"]
    return ", ".join(dict.fromkeys(names)) or "views"


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
