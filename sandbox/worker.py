"""The sandboxed worker process: load a candidate, check it, compare it, time it -> JSON result.

Started by pool.py as `python -m kernelwright.sandbox.worker --result-fd N --device D --home DIR
--private DIR` in its own session, with an allowlisted environment and its own temp cwd and
Triton cache. HOME is the candidate's; PRIVATE holds torch.compile's caches for the reference.
Requests arrive as JSON lines on stdin; replies go out as JSON lines on the result descriptor,
never on stdout, which belongs to the candidate (printing "PASS" there proves nothing).

A worker keeps torch imported and, per task, the reference models, their outputs' layout, the
torch.compile baseline and the roofline, so the next candidate pays only for its own compile and
calls. Anything a candidate does that could have left the process unsound (a CUDA fault, a
patched function, a thread, a sandbox denial, a timeout) makes the worker exit after replying;
the pool starts a fresh one.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import dataclasses
import faulthandler
import gc
import importlib.util
import inspect
import json
import os
import platform
import random
import sys
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import checks, launches, tritoncompat
from .config import EvalConfig
from .isolation import isolate_network, lift_cpu_limit, limit_cpu_seconds, set_limits
from .results import (
    Baseline,
    Correctness,
    Environment,
    EvalResult,
    KernelStats,
    Mismatch,
    OpTime,
    Timings,
)

# Statuses after which the same process may judge the next candidate. Anything else may have
# corrupted the CUDA context or left patched state behind: the worker is replaced.
_CLEAN_STATUSES = ("ok", "incorrect", "compile_error")
# A warm worker is still replaced now and then: Triton's and torch's caches only grow.
_MAX_EVALUATIONS_PER_WORKER = 64
# Attempts at a valid "other shape" before recording that only the default shape was checked.
_MAX_VARIANT_ATTEMPTS = 6


class Verdict(Exception):
    """Ends an evaluation with a status, the rule that fired, and a message for the critic."""

    def __init__(self, status: str, message: str, rule: str | None = None, recycle: bool = False):
        super().__init__(message)
        self.status, self.message, self.rule, self.recycle = status, message, rule, recycle


@dataclass
class Shape:
    """The task at one setting of its size constants: reference models and what they produce."""

    sizes: dict[str, int]
    ns: dict[str, Any]
    init_inputs: list[Any]
    ref: Any  # the reference nn.Module, parameters re-drawn, in the evaluation dtype
    ref64: Any  # the same values in float64: the yardstick for precision
    out_meta: list[tuple[tuple[int, ...], Any]]  # (shape, dtype) of each tensor output


@dataclass
class TaskContext:
    """Everything about a task that does not depend on the candidate; cached per worker."""

    task: Any
    dtype: Any
    main: Shape
    variant: Shape | None
    variant_note: str
    degenerate: bool
    compiled: Any = None
    compiled_error: str | None = None
    work: tuple[int, int] | None = None
    ceilings: Any = None
    notes: list[str] = field(default_factory=list)
    setup_s: dict[str, float] = field(default_factory=dict)  # seconds per step of building it


@dataclass
class Trial:
    pristine: list[Any]
    ref: Any
    ref64: Any


class Worker:
    """One sandboxed evaluator process; `serve()` answers requests until stdin closes."""

    def __init__(
        self,
        device: str,
        home: Path,
        private: Path,
        out,
        layers: list[str],
        gpu_fraction: float,
    ):
        import torch

        self.torch = torch
        self.home = home
        self.private = private
        self.out = out
        self.cuda = device != "cpu"
        self.device = torch.device("cuda", 0) if self.cuda else torch.device("cpu")
        if self.cuda:
            torch.cuda.set_device(0)
            torch.cuda.set_per_process_memory_fraction(gpu_fraction, 0)
        self.contexts: collections.OrderedDict[tuple, TaskContext] = collections.OrderedDict()
        self.evaluations = 0
        self.rng = random.SystemRandom()  # fresh seeds: a candidate cannot predict its inputs
        # Importing torch._dynamo wraps torch.manual_seed and friends; do it before the integrity
        # snapshot so that a trusted lazy import later (torch.compile, FlopCounterMode) does not
        # look like a candidate's patch.
        import torch._dynamo

        tritoncompat.fix_interpreter_index()
        launches.install()
        self._warm_up_triton()
        self.guard = install_guard(home, private)
        self.snapshot = checks.integrity_snapshot()
        self.environment = _environment(torch, self.cuda, (*layers, "audit-hook"))

    # -- protocol ------------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def serve(self, stdin) -> None:
        self.send({"type": "ready", "pid": os.getpid(), "environment": _asdict(self.environment)})
        for line in stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            reply, recycle = self.handle(request)
            reply.update(type="result", id=request["id"], nonce=request["nonce"], recycle=recycle)
            self.send(reply)
            if recycle:
                break

    def handle(self, request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        self.evaluations += 1
        config = EvalConfig.from_dict(request["config"])
        self.set_precision(config.precision)
        try:
            if request["kind"] == "baseline":
                return {"baseline": self.baseline(request, config).to_dict()}, False
            result, recycle = self.evaluate(request, config)
        except BaseException as e:  # the pool must always get a reply
            text = "".join(traceback.format_exception(e))
            message = "internal evaluator error (a bug in kernelwright, not the candidate):\n"
            if request["kind"] == "baseline":
                failed = Baseline(
                    status="crashed", message=message + text, environment=self.environment
                )
                return {"baseline": failed.to_dict()}, True
            result = EvalResult(
                status="crashed",
                rule="evaluator",
                message=message + text,
                environment=self.environment,
            )
            recycle = True
        recycle = recycle or self.evaluations >= _MAX_EVALUATIONS_PER_WORKER
        return {"result": result.to_dict()}, recycle

    def set_precision(self, policy: str) -> None:
        """TF32 off under "strict" (PyTorch leaves cudnn.allow_tf32 on by default, so eager
        "fp32" convs would run on TF32 and make both the baseline and the float64 yardstick
        unfair); on under "tf32-ok", where the candidate may use it too."""
        torch = self.torch
        tf32 = policy == "tf32-ok"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")

    def phase(self, request: dict[str, Any], name: str) -> None:
        self.send({"type": "phase", "id": request["id"], "nonce": request["nonce"], "phase": name})

    # -- the task ------------------------------------------------------------------------------

    def context(self, request: dict[str, Any], config: EvalConfig) -> TaskContext:
        from .task import Task

        t = request["task"]
        overrides = {**t.get("overrides", {}), **config.shapes}
        key = (
            t["source"],
            json.dumps(overrides, sort_keys=True),  # tuple sizes arrive as lists: unhashable
            config.dtype,
            config.check_variant,
            config.precision,
            config.compile_baseline and self.cuda and config.timing,
        )
        if key in self.contexts:
            self.contexts.move_to_end(key)
            return self.contexts[key]
        self.phase(request, "setup")
        self.contexts.clear()  # one task at a time: a task's tensors can fill the device
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()
        task = Task(
            path=t["path"],
            name=t["name"],
            source=t["source"],
            constants=dict(t["constants"]),
            overrides=overrides,
        )
        ctx = self._build_context(task, config)
        self.contexts[key] = ctx
        return ctx

    def _build_context(self, task, config: EvalConfig) -> TaskContext:
        from .task import DTYPES

        dtype = DTYPES[config.dtype]
        seed = self.rng.randrange(2**31)
        setup: dict[str, float] = {}
        clock = _Stopwatch(setup)
        try:
            with clock("reference"):
                main, out_a = self._shape(task, task.overrides, dtype, seed)
        except Exception as e:
            raise Verdict(
                "runtime_error",
                f"the task's reference fails at its own shape "
                f"{_sizes_text(task.sizes)}: {_one_line(e)}",
                rule="task",
            ) from e
        with clock("input_checks"):
            fixed = self._inputs_ignore_seed(main)
            degenerate = not fixed and self._is_degenerate(main, out_a)
        variant, note = (None, "variant check disabled")
        if config.check_variant:
            with clock("other_shape"):
                variant, note = self._variant(task, dtype, seed)
        ctx = TaskContext(
            task=task,
            dtype=dtype,
            main=main,
            variant=variant,
            variant_note=note,
            degenerate=degenerate,
            setup_s=setup,
        )
        if fixed:
            ctx.notes.append(
                "the task's get_inputs gives the same values for every seed (does it seed "
                "torch itself?): every trial and timed round sees the same inputs, so a "
                "candidate that memoises its outputs cannot be told from an honest one; "
                "remove the seeding from the task"
            )
        if degenerate:
            ctx.notes.append(
                "degenerate task: the reference output does not depend on the "
                "inputs (two input draws gave identical outputs)"
            )
        if self.cuda:
            self._prepare_timing(ctx, config, seed)
        return ctx

    def _shape(self, task, overrides, dtype, seed) -> tuple[Shape, Any]:
        from .compare import flatten_outputs
        from .task import build_inputs, build_reference, task_namespace

        torch = self.torch
        ns = task_namespace(task, overrides)
        torch.manual_seed(seed)
        init_inputs = list(ns["get_init_inputs"]())
        ref = build_reference(ns, dtype, self.device, seed)
        ref64 = copy.deepcopy(ref).to(torch.float64)
        inputs = build_inputs(ns, dtype, self.device, seed + 1)
        with torch.no_grad():
            out = ref(*inputs)
        meta = [
            (tuple(v.shape), v.dtype)
            for _, v in flatten_outputs(out)
            if isinstance(v, torch.Tensor)
        ]
        sizes = {**task.constants, **overrides}
        return Shape(sizes, ns, init_inputs, ref, ref64, meta), out

    def _inputs_ignore_seed(self, shape: Shape) -> bool:
        """True when two draws with different seeds give bitwise the same floating inputs."""
        from .compare import same_bits
        from .task import build_inputs

        dtype = _dtype_of(shape.ref, self.torch)
        a, b = (build_inputs(shape.ns, dtype, self.device, self.rng.randrange(2**31)) for _ in "ab")
        pairs = [
            (x, y)
            for x, y in zip(a, b)
            if isinstance(x, self.torch.Tensor) and x.is_floating_point() and x.numel() > 1
        ]
        return bool(pairs) and all(same_bits(x, y) for x, y in pairs)

    def _is_degenerate(self, shape: Shape, out_a) -> bool:
        from .compare import flatten_outputs, same_bits
        from .task import build_inputs

        inputs = build_inputs(
            shape.ns, _dtype_of(shape.ref, self.torch), self.device, self.rng.randrange(2**31)
        )
        if not any(isinstance(x, self.torch.Tensor) for x in inputs):
            return False
        with self.torch.no_grad():
            out_b = shape.ref(*inputs)
        a, b = flatten_outputs(out_a), flatten_outputs(out_b)
        return all(
            isinstance(x, self.torch.Tensor)
            and isinstance(y, self.torch.Tensor)
            and x.shape == y.shape
            and same_bits(x, y)
            for (_, x), (_, y) in zip(a, b)
        )

    def _variant(self, task, dtype, seed) -> tuple[Shape | None, str]:
        from .task import variant_note, variant_overrides

        tried = []
        for overrides in variant_overrides(task)[:_MAX_VARIANT_ATTEMPTS]:
            merged = {**task.overrides, **overrides}
            try:
                shape, _ = self._shape(task, merged, dtype, seed + 7)
            except Exception as e:  # a variant the task's own constraints forbid
                tried.append(f"{_sizes_text(overrides)}: {_one_line(e)}")
                continue
            return shape, variant_note(task, overrides, tried)
        if not task.constants:
            return None, "only the default shape was checked: the task has no size constants"
        return None, (
            "only the default shape was checked: the reference itself fails at every "
            "variant tried (" + "; ".join(tried[:3]) + ")"
        )

    def _prepare_timing(self, ctx: TaskContext, config: EvalConfig, seed: int) -> None:
        from .roofline import count_work, measure_ceilings
        from .task import build_inputs

        torch = self.torch
        clock = _Stopwatch(ctx.setup_s)
        inputs = build_inputs(ctx.main.ns, ctx.dtype, self.device, seed + 3)
        with clock("work_count"), torch.no_grad():
            out = ctx.main.ref(*inputs)
            ctx.work = count_work(ctx.main.ref, inputs, out)
        with clock("device_ceilings"):
            ctx.ceilings = measure_ceilings(self.device)
        if config.compile_baseline and config.timing:
            try:
                import torch._inductor.config as inductor_config

                inductor_config.compile_threads = 1  # no compile subprocess pool in the sandbox
                compiled = torch.compile(ctx.main.ref)
                # The reference's Triton kernels are built (on this first call) into the
                # evaluator's cache, not the candidates' (home/triton, which they can write).
                triton_cache = _environ("TRITON_CACHE_DIR", str(self.private / "triton"))
                with clock("torch_compile"), triton_cache, torch.no_grad():
                    compiled(*inputs)
                    torch.cuda.synchronize()
                ctx.compiled = compiled
            except Exception as e:  # a task torch.compile cannot handle
                ctx.compiled_error = f"torch.compile failed on the reference: {_one_line(e)}"

    # -- one candidate -------------------------------------------------------------------------

    def evaluate(self, request: dict[str, Any], config: EvalConfig) -> tuple[EvalResult, bool]:
        started = time.monotonic()
        task_info = request["task"]
        base = dict(
            task=task_info["name"],
            task_hash=request.get("task_hash", ""),
            source_hash=request.get("source_hash", ""),
            dtype=config.dtype,
            shape_overrides={**task_info.get("overrides", {}), **config.shapes},
            environment=self.environment,
        )
        evaluation = None
        try:
            ctx = self.context(request, config)
            self.phase(request, "candidate")
            # Trusted setup may legitimately import modules that wrap watched functions; what
            # the candidate changes is judged against the state right before it loads.
            self.snapshot = checks.integrity_snapshot()
            evaluation = Evaluation(self, ctx, config, request, self.evaluations)
            result = evaluation.run(base)
            recycle = False
        except Verdict as v:
            result = EvalResult(
                status=v.status,
                rule=v.rule,
                message=v.message,
                correctness=evaluation.correctness() if evaluation else None,
                kernels=evaluation.kernels() if evaluation else (),
                **base,
            )
            recycle = v.recycle or v.status not in _CLEAN_STATUSES
        finally:
            if evaluation is not None:
                evaluation.cleanup()
        wall = time.monotonic() - started
        return dataclasses.replace(result, wall_s=round(wall, 3)), recycle

    def baseline(self, request: dict[str, Any], config: EvalConfig) -> Baseline:
        from .roofline import roofline

        started = time.monotonic()
        t = request["task"]
        base = dict(
            task=t["name"],
            task_hash=request.get("task_hash", ""),
            dtype=config.dtype,
            shape_overrides={**t.get("overrides", {}), **config.shapes},
            environment=self.environment,
        )
        try:
            # The same context as the candidates' evaluations: profile and first round share
            # one setup (reference, other shape, torch.compile).
            ctx = self.context(request, config)
        except Verdict as v:
            return Baseline(status="error", message=v.message, **base)
        # As in evaluate(): the state to hold is the one after trusted setup, set_precision
        # included (torch 2.11 on CUDA turns matmul.fp32_precision from 'none' to 'ieee' there,
        # which the worker's start-up snapshot would otherwise count as a patch).
        self.snapshot = checks.integrity_snapshot()
        setup = dict(ctx.setup_s)
        clock = _Stopwatch(setup)
        with clock("op_breakdown"):
            ops, ops_note = self.op_breakdown(ctx)
        if not self.cuda:
            return Baseline(
                status="ok",
                timings=_interpreter_timings(),
                ops=ops,
                ops_note=ops_note,
                **base,
                wall_s=time.monotonic() - started,
                setup_s=_rounded(setup),
            )
        self.phase(request, "timing")
        with clock("timing"):
            timings = Evaluation(self, ctx, config, request, self.evaluations).time(None)
        bytes_, flops = ctx.work
        rf = roofline(bytes_, flops, config.dtype, ctx.ceilings)
        rf = dataclasses.replace(rf, fraction=rf.bound_ms / timings.eager.median_ms)
        return Baseline(
            status="ok",
            timings=timings,
            roofline=rf,
            ops=ops,
            ops_note=ops_note,
            **base,
            wall_s=time.monotonic() - started,
            setup_s=_rounded(setup),
        )

    def op_breakdown(self, ctx: TaskContext, calls: int = 3) -> tuple[tuple[OpTime, ...], str]:
        """Self time per aten op of the reference forward, from torch.profiler, top 12."""
        from torch.profiler import ProfilerActivity, profile

        from .task import build_inputs

        torch = self.torch
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        inputs = build_inputs(ctx.main.ns, ctx.dtype, self.device, self.rng.randrange(2**31))
        try:
            with torch.no_grad():
                ctx.main.ref(*inputs)  # warm: first calls pay for lazy initialisation
                with profile(activities=activities) as prof:
                    for _ in range(calls):
                        ctx.main.ref(*inputs)
                    if self.cuda:
                        torch.cuda.synchronize()
            rows = []
            for e in prof.key_averages():
                if not e.key.startswith("aten::"):
                    continue
                if self.cuda:
                    us = getattr(e, "self_device_time_total", None)
                    us = getattr(e, "self_cuda_time_total", 0) if us is None else us
                else:
                    us = e.self_cpu_time_total
                if us > 0:
                    rows.append((e.key, e.count, us))
        except Exception as e:  # a profiler that does not work here must not fail the baseline
            return (), f"no op breakdown: torch.profiler failed ({_one_line(e)})"
        total = sum(us for _, _, us in rows) or 1.0
        rows.sort(key=lambda r: -r[2])
        ops = tuple(
            OpTime(name, max(1, count // calls), us / calls / 1000, us / total)
            for name, count, us in rows[:12]
        )
        where = "device" if self.cuda else "CPU (op mix only: the GPU will differ)"
        return ops, f"torch.profiler self {where} time over {calls} forward calls"

    # -- helpers -------------------------------------------------------------------------------

    def _warm_up_triton(self) -> None:
        """Compile and launch one trusted kernel so Triton builds its launcher outside the guard."""
        from .warmup import warm_up

        warm_up(self.device)

    def check_state(self, base_threads: set[int]) -> None:
        """Sandbox denials, patched functions, precision flags, leftover threads -> rejected."""
        if self.guard.violations:
            v = self.guard.violations[0]
            raise Verdict("rejected", v.message, rule=v.rule, recycle=True)
        diff = checks.integrity_diff(self.snapshot, checks.integrity_snapshot())
        if diff:
            # Put back what was patched first: a patched builtin could break our own reply.
            checks.integrity_restore(self.snapshot)
            rule, what = diff[0]
            raise Verdict(
                "rejected",
                f"the candidate changed {what}: patching torch, triton, "
                "the timer or precision flags is not allowed",
                rule=rule,
                recycle=True,
            )
        extra = checks.python_threads() - base_threads
        if extra:
            raise Verdict(
                "rejected",
                f"the candidate left {len(extra)} Python thread(s) running: "
                "all work must happen inside forward, on the calling thread",
                rule="thread",
                recycle=True,
            )


class Evaluation:
    """The checks on one candidate, in order; any failure raises a Verdict."""

    def __init__(self, worker: Worker, ctx: TaskContext, config: EvalConfig, request, serial: int):
        self.w, self.ctx, self.config, self.request = worker, ctx, config, request
        self.torch = worker.torch
        self.module_name = f"kw_candidate_{serial}"
        self.path = worker.home / f"{self.module_name}.py"
        self.module = None
        self.trials: list[Trial] = []
        self.seeds: list[int] = []
        self.max_abs = self.max_rel = 0.0
        self.err64: float | None = None
        self.eager64: float | None = None
        self.limit64: float | None = None
        self.deterministic: bool | None = None
        self.mismatch: Mismatch | None = None
        self.shapes_checked: list[dict[str, int]] = []
        self.variant_checked = False
        self.calls = 0
        self.prev_outputs: collections.deque = collections.deque(maxlen=3)
        self.base_threads = checks.python_threads()
        self.phases: dict[str, float] = {}
        self.step = _Stopwatch(self.phases)  # `with self.step("trials"):` times the block
        self.timed_edge_cases = 0  # timed outputs past allclose but within float64 precision
        self.edge_elements = 0  # the most elements of a checked output rescued that way

    # -- the sequence --------------------------------------------------------------------------

    def run(self, base: dict[str, Any]) -> EvalResult:
        limit_cpu_seconds(self.config.cpu_time_s)
        base = {**base, "phases_s": self.phases}
        with self.step("load"):
            model = self.load()
        with self.step("trials"):
            self.check_trials(model)
        with self.step("same_address"):
            self.check_same_address(model)
        with self.step("drift"):
            self.check_drift(model)
        with self.step("variant"):
            self.check_variant()
        notes = list(self.ctx.notes)
        if not self.w.cuda and self.ctx.dtype == self.w.torch.bfloat16:
            notes.append(
                "bf16 under the Triton interpreter, whose fp32 -> bf16 conversions truncate: the "
                "precision limit allows one more bf16 ulp than on a GPU"
            )
        if self.deterministic is False:
            notes.append(
                "not bitwise deterministic: two calls on the same inputs differed "
                "(within tolerance; atomics or split reductions do this)"
            )
        if self.edge_elements:
            notes.append(
                f"up to {self.edge_elements} element(s) of a checked output differed from "
                "eager's beyond the allclose tolerance, each within eager's own worst error of a "
                "float64 reference (an ill-conditioned output: both are rounding differently)"
            )
        if not self.w.cuda or not self.config.timing:
            timings = (
                _interpreter_timings()
                if not self.w.cuda
                else Timings(meaningful=False, note="timing disabled")
            )
            return EvalResult(
                status="ok",
                correctness=self.correctness(),
                timings=timings,
                kernels=self.kernels(),
                notes=tuple(notes),
                **base,
            )
        self.w.phase(self.request, "timing")
        with self.step("timing"):
            timings = self.time(candidate=model)
        with self.step("drift"):
            self.check_drift(model, calls=1, after="after timing")
        if self.timed_edge_cases:
            notes.append(
                f"{self.timed_edge_cases} timed output(s) differed from eager's beyond the "
                "allclose tolerance at some element but were as accurate as eager against a "
                "float64 reference (an ill-conditioned output: both are rounding differently)"
            )
        return self.timed_result(base, timings, notes)

    def timed_result(self, base, timings: Timings, notes: list[str]) -> EvalResult:
        from .roofline import is_impossible, roofline

        cand = timings.candidate.median_ms
        bytes_, flops = self.ctx.work
        rf = roofline(bytes_, flops, self.config.dtype, self.ctx.ceilings)
        rf = dataclasses.replace(rf, fraction=rf.bound_ms / cand if cand > 0 else None)
        if is_impossible(cand, rf.bound_ms):
            raise Verdict(
                "rejected",
                f"median time {cand:.4f} ms is under the physical lower bound {rf.bound_ms:.4f} ms "
                f"({_gb(bytes_)} moved at {rf.bandwidth_gbps:.0f} GB/s, {flops / 1e9:.2f} GFLOP at "
                f"{rf.peak_tflops:.0f} TFLOP/s): the measured time cannot be the real work "
                "(memoised outputs, work hidden from the timer?)",
                rule="roofline",
                recycle=True,
            )
        eager = timings.eager.median_ms if timings.eager else None
        compiled = timings.compiled.median_ms if timings.compiled else None
        return EvalResult(
            status="ok",
            correctness=self.correctness(),
            timings=timings,
            roofline=rf,
            speedup_eager=eager / cand if eager and cand > 0 else None,
            speedup_compiled=compiled / cand if compiled and cand > 0 else None,
            kernels=self.kernels(),
            notes=tuple(notes),
            **base,
        )

    # -- loading -------------------------------------------------------------------------------

    def load(self):
        """Import the candidate and build ModelNew with the reference's parameters."""
        source = self.request["source"]
        self.path.write_text(source)
        spec = importlib.util.spec_from_file_location(self.module_name, self.path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.module_name] = module
        self.module = module
        with self.candidate_code("importing the candidate"):
            spec.loader.exec_module(module)
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type) or not issubclass(cls, self.torch.nn.Module):
            raise Verdict(
                "rejected", "the candidate defines no `class ModelNew(nn.Module)`", rule="model-new"
            )
        return self.build(cls, self.ctx.main)

    def build(self, cls, shape: Shape):
        from .task import load_parameters

        self.check_signature(cls, shape)
        torch = self.torch
        # Built on the device: __init__'s parameters are overwritten with the reference's below,
        # and a large weight initialised on the host costs seconds per evaluation.
        with self.candidate_code("constructing ModelNew"), torch.device(self.w.device):
            torch.manual_seed(0)
            model = cls(*shape.init_inputs)
            model = model.to(device=self.w.device)
            model = model.to(self.ctx.dtype)
        if not isinstance(model, torch.nn.Module):
            raise Verdict(
                "rejected", "ModelNew(...).to(...) did not return an nn.Module", rule="model-new"
            )
        model.train(shape.ref.training)
        unmatched = load_parameters(shape.ref, model)
        params = {name for name, _ in model.named_parameters()}
        bad = [n for n in unmatched if n in params]
        if bad:
            ref_names = [n for n, _ in shape.ref.named_parameters()]
            raise Verdict(
                "rejected",
                f"ModelNew's parameters {bad[:5]} match none of Model's ({ref_names[:8]}) by name "
                "or by order and shape. Hold the same parameters as Model (same names, e.g. build "
                "the same nn.Linear/nn.Conv2d submodules) so both get the same values.",
                rule="parameters",
            )
        return model

    def check_signature(self, cls, shape: Shape) -> None:
        ref_params = _init_params(shape.ns["Model"])
        new_params = _init_params(cls)
        if ref_params != new_params:
            raise Verdict(
                "rejected",
                f"ModelNew.__init__({', '.join(new_params)}) must take the same arguments as "
                f"Model.__init__({', '.join(ref_params)})",
                rule="signature",
            )

    # -- running candidate code ----------------------------------------------------------------

    @contextlib.contextmanager
    def candidate_code(self, what: str):
        """Run candidate code under the sandbox guard, turning its failures into verdicts."""
        try:
            with self.w.guard.active():
                yield
                if self.w.cuda:
                    self.torch.cuda.synchronize()  # async faults surface here, inside the guard
        except Verdict:
            raise
        except BaseException as e:  # candidate code may raise anything
            self.w.check_state(self.base_threads)  # a sandbox denial explains the error best
            raise self.classify(e, what) from None
        self.w.check_state(self.base_threads)

    def classify(self, e: BaseException, what: str) -> Verdict:
        text = _candidate_traceback(e, str(self.path))
        cuda_fault = self.w.cuda and _is_cuda_fault(e)
        if isinstance(e, SystemExit):
            return Verdict(
                "runtime_error",
                f"the candidate called exit() while {what}: a result "
                "is judged by the evaluator, never reported by the candidate",
                rule="exit",
            )
        if _is_compile_error(e):
            return Verdict("compile_error", f"Triton compilation failed while {what}:\n{text}")
        text_lower = str(e).lower()
        if isinstance(e, getattr(self.torch.cuda, "OutOfMemoryError", ())) or (
            isinstance(e, (RuntimeError, MemoryError))
            and (
                "out of memory" in text_lower
                or "can't allocate memory" in text_lower
                or isinstance(e, MemoryError)
            )
        ):
            return Verdict(
                "runtime_error", f"out of memory while {what}:\n{text}", rule="memory", recycle=True
            )
        return Verdict(
            "runtime_error",
            f"{type(e).__name__} while {what}:\n{text}",
            rule="cuda-fault" if cuda_fault else None,
            recycle=cuda_fault,
        )

    def call(self, model, inputs: list[Any], what: str):
        """One forward call of the candidate; it must launch a Triton kernel of its own."""
        launches.reset()
        self.calls += 1
        with self.candidate_code(what), self.torch.no_grad():
            out = model(*inputs)
        if not launches.launches(self.module_name):
            raise Verdict(
                "rejected",
                f"{what}: ModelNew.forward launched no @triton.jit kernel "
                "defined in the candidate file",
                rule="no-triton-launch",
            )
        return out

    # -- correctness ---------------------------------------------------------------------------

    def reference(self, shape: Shape, pristine: list[Any]) -> tuple[Any, Any]:
        torch = self.torch
        with torch.no_grad():
            ref = shape.ref(*_clone(pristine, torch))
            ref64 = shape.ref64(*_to64(pristine, torch))
        return ref, ref64

    def fresh_inputs(self, shape: Shape) -> tuple[list[Any], list[Any]]:
        from .task import build_inputs

        seed = self.w.rng.randrange(2**31)
        self.seeds.append(seed)
        inputs = build_inputs(shape.ns, self.ctx.dtype, self.w.device, seed)
        return inputs, _clone(inputs, self.torch)

    def poison(self, shape: Shape) -> None:
        """Fill the blocks the allocator will hand out next with NaN (or -1 for integers).

        A candidate returning `torch.empty_like(x)` unwritten would otherwise get the memory of
        a freed tensor that may hold the right answer (allocator result reuse).
        """
        torch = self.torch
        blocks = []
        for shp, dtype in shape.out_meta:
            for _ in range(2):
                t = torch.empty(shp, dtype=dtype, device=self.w.device)
                t.fill_(float("nan") if dtype.is_floating_point else -1)
                blocks.append(t)
        del blocks

    def checked_call(
        self,
        model,
        shape: Shape,
        args,
        pristine,
        what: str,
        hint: str = "",
        rule: str | None = None,
        refs: tuple[Any, Any] | None = None,
    ):
        """Call the candidate, then check its inputs and its output against the reference.

        The reference runs after the candidate (unless `refs` are given), so no freed block can
        hold the right answer for this input when the candidate allocates its output.
        """
        out = self.call(model, args, what)
        self.check_inputs(args, pristine, what)
        ref, ref64 = refs if refs is not None else self.reference(shape, pristine)
        self.check_output(out, ref, ref64, args, model, f"{what}{hint}", rule=rule)
        return out, ref, ref64

    def check_trials(self, model) -> None:
        shape = self.ctx.main
        self.shapes_checked.append(shape.sizes)
        for t in range(self.config.trials):
            inputs, pristine = self.fresh_inputs(shape)
            self.poison(shape)
            _, ref, ref64 = self.checked_call(model, shape, inputs, pristine, f"trial {t + 1}")
            self.trials.append(Trial(pristine, ref, ref64))
            if t == 0:
                self.first_inputs = inputs

    def check_same_address(self, model) -> None:
        """New values in the same tensors (same data_ptr, same id): a cache keyed on them fails."""
        from .compare import same_bits

        shape, inputs = self.ctx.main, self.first_inputs
        fresh, _ = self.fresh_inputs(shape)
        for old, new in zip(inputs, fresh):
            if isinstance(old, self.torch.Tensor):
                old.copy_(new)
        pristine = _clone(inputs, self.torch)
        out, ref, ref64 = self.checked_call(
            model,
            shape,
            inputs,
            pristine,
            "the call on the same input tensors refilled with new values",
            hint=" (a result cached by data_ptr or id would be stale)",
            rule="mismatch",
        )
        args = _clone(pristine, self.torch)
        again, _, _ = self.checked_call(
            model, shape, args, pristine, "the determinism check", rule="drift", refs=(ref, ref64)
        )
        pairs = zip(_tensors(out, self.torch), _tensors(again, self.torch))
        self.deterministic = all(same_bits(a, b) for a, b in pairs)

    def check_drift(self, model, calls: int | None = None, after: str = "") -> None:
        n = self.config.drift_calls if calls is None else calls
        for k in range(n):
            trial = self.trials[k % len(self.trials)]
            args = _clone(trial.pristine, self.torch)
            what = f"repeated call {k + 1}" + (f" {after}" if after else "")
            self.checked_call(
                model,
                self.ctx.main,
                args,
                trial.pristine,
                what,
                hint=" (right before, wrong now: state kept across calls?)",
                rule="drift",
                refs=(trial.ref, trial.ref64),
            )

    def check_variant(self) -> None:
        shape = self.ctx.variant
        if shape is None:
            return
        sizes = _sizes_text(shape.sizes)
        try:
            model = self.build(self.module.ModelNew, shape)
            inputs, pristine = self.fresh_inputs(shape)
            self.poison(shape)
            self.checked_call(
                model,
                shape,
                inputs,
                pristine,
                f"the other shape {sizes}",
                hint=" (sizes hard-coded, or only part of the output computed?)",
                rule="variant",
            )
        except Verdict as v:
            if v.status == "incorrect":
                v.rule = "variant"
                v.message = f"correct at the task's shape, wrong at {sizes}: {v.message}"
            raise
        self.shapes_checked.append(shape.sizes)
        self.variant_checked = True

    def check_inputs(self, inputs: list[Any], pristine: list[Any], what: str) -> None:
        from .compare import same_bits

        for i, (a, b) in enumerate(zip(inputs, pristine)):
            if isinstance(a, self.torch.Tensor) and not same_bits(a, b):
                raise Verdict(
                    "rejected",
                    f"{what}: the candidate modified input {i} in place "
                    "(inputs are checked after every call)",
                    rule="input-mutation",
                )

    def check_output(self, out, ref, ref64, inputs, model, what: str, rule: str | None = None):
        from .compare import (
            check_structure,
            compare,
            error_stats,
            flatten_outputs,
            has_bad_values,
            precision_limit,
            rel_error,
            storages_overlap,
        )

        torch = self.torch
        problem = check_structure(out, ref)
        if problem is not None:
            r, message = problem
            status = "rejected" if r == "output-type" else "incorrect"
            raise Verdict(status, f"{what}: {message}", rule=r)
        outs = [v for _, v in flatten_outputs(out) if isinstance(v, torch.Tensor)]
        owned = [p for p in model.parameters()] + [b for b in model.buffers()]
        for o in outs:
            for x in [i for i in inputs if isinstance(i, torch.Tensor)] + owned:
                if storages_overlap(o, x):
                    raise Verdict(
                        "rejected",
                        f"{what}: an output shares memory with an input or "
                        "a parameter: return a freshly allocated tensor",
                        rule="alias",
                    )
            for prev, _saved in self.prev_outputs:
                if storages_overlap(o, prev):
                    raise Verdict(
                        "rejected",
                        f"{what}: the output reuses the memory of an output "
                        "returned by an earlier call: allocate a new output per call",
                        rule="reuse",
                    )
        for prev, saved in self.prev_outputs:
            if not _same(prev, saved, torch):
                raise Verdict(
                    "rejected",
                    f"{what}: an output returned by an earlier call changed "
                    "afterwards: the candidate writes into memory it already returned",
                    rule="reuse",
                )
        for o in outs:
            self.prev_outputs.append((o, o.clone()))
        named_out, named_ref64 = dict(flatten_outputs(out)), dict(flatten_outputs(ref64))
        for name, r in flatten_outputs(ref):
            o = named_out[name]
            if not isinstance(r, torch.Tensor):
                continue
            mismatch = compare(o, r, self.ctx.dtype)
            if mismatch is not None and named_ref64.get(name) is not None:
                # Past allclose of eager's output: the float64 reference decides (compare's doc).
                near = mismatch
                mismatch = compare(o, r, self.ctx.dtype, ref64=named_ref64[name])
                if mismatch is None:
                    self.edge_elements = max(self.edge_elements, near.count)
            if mismatch is not None:
                self.mismatch = mismatch
                kind = "nan" if has_bad_values(o, r) else (rule or "mismatch")
                raise Verdict("incorrect", f"{what}: {_mismatch_text(mismatch)}", rule=kind)
            max_abs, max_rel = error_stats(o, r, self.ctx.dtype)  # chunked, floored |expected|
            self.max_abs, self.max_rel = max(self.max_abs, max_abs), max(self.max_rel, max_rel)
        for (name, o), (_, r), (_, r64) in zip(
            flatten_outputs(out), flatten_outputs(ref), flatten_outputs(ref64)
        ):
            if not isinstance(r, torch.Tensor) or not r.dtype.is_floating_point:
                continue
            err, eager = rel_error(o, r64), rel_error(r, r64)
            limit = precision_limit(
                eager, self.ctx.dtype, self.config.precision, interpreter=not self.w.cuda
            )
            self.err64 = max(self.err64 or 0.0, err)
            self.eager64 = max(self.eager64 or 0.0, eager)
            self.limit64 = limit if self.limit64 is None else min(self.limit64, limit)
            if err > limit:
                raise Verdict(
                    "incorrect",
                    f"{what}: {name} is less accurate than PyTorch: relative error vs a float64 "
                    f"reference {err:.2e}, eager PyTorch's {eager:.2e}, allowed {limit:.2e} "
                    f"(policy {self.config.precision}). This is what TF32 or fp16/bf16 "
                    "accumulation looks like: keep fp32 operands and accumulators "
                    '(tl.dot(..., input_precision="ieee") for fp32), or run with '
                    "--precision tf32-ok if TF32 is acceptable.",
                    rule="precision",
                )

    # -- timing --------------------------------------------------------------------------------

    def time(self, candidate) -> Timings:
        """Interleaved timing of eager, torch.compile and the candidate.

        Every round draws fresh inputs and all contenders get copies of the same draw, so no
        output can be memoised across timed calls (no input is ever seen twice); the candidate's
        output is checked against eager's on the same inputs in the same round.
        """
        from .compare import compare, flatten_outputs
        from .task import build_inputs
        from .timing import time_interleaved

        torch, ctx, cfg = self.torch, self.ctx, self.config
        rounds: dict[int, dict[str, Any]] = {}  # round -> pristine inputs and outputs so far

        def prepare(i):
            if i not in rounds:
                seed = self.w.rng.randrange(2**31)
                rounds[i] = {"pristine": build_inputs(ctx.main.ns, ctx.dtype, self.w.device, seed)}
            return _clone(rounds[i]["pristine"], torch)

        def eager(*args):
            with torch.no_grad():
                return ctx.main.ref(*args)

        fns = {"eager": (prepare, eager)}
        if ctx.compiled is not None:

            def compiled(*args):
                with torch.no_grad():
                    return ctx.compiled(*args)

            fns["compiled"] = (prepare, compiled)
        failures: list[tuple[str, str]] = []  # (rule, what happened)
        if candidate is not None:
            guard = self.w.guard

            def cand(*args):
                with guard.active(), torch.no_grad():
                    return candidate(*args)

            fns["candidate"] = (prepare, cand)

        def after_call(name, i, out, args):
            state = rounds[i]
            state[name] = True
            if name == "candidate" and not failures:
                if any(
                    isinstance(a, torch.Tensor) and not _same(a, b, torch)
                    for a, b in zip(args, state["pristine"])
                ):
                    failures.append(("input-mutation", f"timed call {i}: an input was modified"))
                else:
                    state["candidate_out"] = out
            elif name == "eager" and candidate is not None:
                state["eager_out"] = out
            if "candidate_out" in state and "eager_out" in state and not failures:
                out, ref = state.pop("candidate_out"), state.pop("eager_out")
                pairs = zip(flatten_outputs(out), flatten_outputs(ref))
                if any(
                    isinstance(r, torch.Tensor) and compare(o, r, ctx.dtype) is not None
                    for (_, o), (_, r) in pairs
                ):
                    self.judge_timed_mismatch(i, out, ref, state["pristine"], failures)
            if all(n in state for n in fns):  # the round is over: let its tensors go
                del rounds[i]

        limit_cpu_seconds(cfg.cpu_time_s)  # timing gets a CPU budget of its own
        try:
            samples = time_interleaved(
                fns,
                reps=cfg.reps,
                warmup=cfg.warmup,
                l2_flush=cfg.l2_flush,
                after_call=after_call,
                cuda_graphs=cfg.cuda_graphs,
                head_start_us=cfg.head_start_us,
            )
        except Verdict:
            raise
        except BaseException as e:
            self.w.check_state(self.base_threads)
            raise self.classify(e, "timing") from None
        self.w.check_state(self.base_threads)
        if failures:
            rule, what = failures[0]
            status = "rejected" if rule == "input-mutation" else "incorrect"
            raise Verdict(
                status,
                f"{what} (outputs of timed calls are checked too: "
                "right during the checks, wrong while timed)",
                rule=rule,
            )
        return Timings(
            meaningful=True,
            note=(
                f"median of {cfg.reps} interleaved calls, fresh inputs every round, "
                f"L2 flushed: {cfg.l2_flush}, GPU head start: {cfg.head_start_us:g} us"
            ),
            candidate=samples.get("candidate"),
            eager=samples.get("eager"),
            compiled=samples.get("compiled"),
            compiled_error=ctx.compiled_error,
            cuda_graphs=cfg.cuda_graphs,
        )

    def judge_timed_mismatch(self, i: int, out, ref, pristine, failures: list) -> None:
        """A timed output outside the allclose tolerance of eager's, on inputs no check has seen.

        Fresh inputs every round mean dozens of new draws per evaluation, and on an
        ill-conditioned output (a long sum with cancellation) two equally accurate fp32 results
        can differ by more than the tolerance at an element or two: on the H200, two launch
        configurations of an honest matmul-then-sum kernel (level2/06), as accurate as eager
        against float64 in their checks, failed a timed call that way. The float64 reference
        of the round decides, as in the checks: an output whose error is within the precision
        limit (PRECISION_FACTOR x eager's own, with its floor) and whose every element is within
        compare's float64-widened tolerance is as right as eager's and passes, with a note; a
        memoised, stale or partial output is orders of magnitude past both.
        """
        from .compare import compare, precision_limit, rel_error

        torch = self.torch
        try:
            with torch.no_grad():
                ref64 = self.ctx.main.ref64(*_to64(pristine, torch))
            err, eager = rel_error(out, ref64), rel_error(ref, ref64)
            elementwise = compare(out, ref, self.ctx.dtype, ref64=ref64)
        except Exception as e:  # no float64 verdict here: the allclose miss stands
            failures.append(("drift", f"timed call {i}: wrong result ({_one_line(e)})"))
            return
        limit = precision_limit(eager, self.ctx.dtype, self.config.precision)
        if err > limit or elementwise is not None:
            where = f"; {_mismatch_text(elementwise)}" if elementwise is not None else ""
            failures.append(
                (
                    "drift",
                    f"timed call {i}: wrong result (relative error vs float64 {err:.2e}, "
                    f"eager's {eager:.2e}, allowed {limit:.2e}{where})",
                )
            )
        else:
            self.timed_edge_cases += 1

    # -- reporting -----------------------------------------------------------------------------

    def correctness(self) -> Correctness:
        from .compare import TOLERANCES

        atol, rtol = TOLERANCES[self.ctx.dtype]
        return Correctness(
            trials=len(self.trials),
            seeds=tuple(self.seeds),
            shapes=tuple(self.shapes_checked),
            variant_checked=self.variant_checked,
            variant_note=self.ctx.variant_note,
            atol=atol,
            rtol=rtol,
            precision_policy=self.config.precision,
            max_abs_err=self.max_abs,
            max_rel_err=self.max_rel,
            err_vs_fp64=self.err64,
            eager_err_vs_fp64=self.eager64,
            precision_limit=self.limit64,
            deterministic=self.deterministic,
            degenerate_task=self.ctx.degenerate,
            mismatch=self.mismatch,
        )

    def kernels(self) -> tuple[KernelStats, ...]:
        return launches.kernel_stats(self.module_name)

    def cleanup(self) -> None:
        lift_cpu_limit()
        self.w.guard.reset()
        sys.modules.pop(self.module_name, None)
        self.module = None
        self.trials.clear()
        self.prev_outputs.clear()
        self.first_inputs = None
        gc.collect()
        if self.w.cuda:
            # After a CUDA fault the context is sticky-broken and this re-raises it; the verdict
            # (runtime_error, cuda-fault) is already made and the worker will be replaced.
            with contextlib.suppress(Exception):
                self.torch.cuda.empty_cache()


# -- small pure helpers ----------------------------------------------------------------------------


def _init_params(cls) -> list[str]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    return [
        p.name if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) else f"*{p.name}"
        for p in list(sig.parameters.values())[1:]
    ]


def _clone(values: list[Any], torch) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in values]


def _to64(values: list[Any], torch) -> list[Any]:
    return [
        v.to(torch.float64)
        if isinstance(v, torch.Tensor) and v.is_floating_point()
        else (v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v))
        for v in values
    ]


def _tensors(out, torch) -> list[Any]:
    from .compare import flatten_outputs

    return [v for _, v in flatten_outputs(out) if isinstance(v, torch.Tensor)]


def _same(a, b, torch) -> bool:
    from .compare import same_bits

    return a.shape == b.shape and a.dtype == b.dtype and same_bits(a, b)


def _dtype_of(model, torch):
    for p in list(model.parameters()) + list(model.buffers()):
        if p.is_floating_point():
            return p.dtype
    return torch.get_default_dtype()


def _mismatch_text(m: Mismatch) -> str:
    first = "; ".join(
        f"at {list(idx)} got {got:.6g} expected {exp:.6g}" for idx, got, exp in m.first_bad[:3]
    )
    return (
        f"{m.output}: {m.count} of {m.total} elements differ "
        f"(max abs error {m.max_abs_err:.3g}, max rel error {m.max_rel_err:.3g}); {first}"
    )


def _sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "(no size constants)"


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _gb(n: int) -> str:
    return f"{n / 1e9:.3f} GB"


def _candidate_traceback(e: BaseException, path: str) -> str:
    """The exception with the candidate's own frames (file line numbers and source lines)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
    lines = [f"  candidate.py line {f.lineno}, in {f.name}: {f.line}" for f in frames[-6:]]
    message = "".join(traceback.format_exception_only(type(e), e)).strip()
    if len(message) > 2500:
        message = message[:2000] + "\n...\n" + message[-400:]
    return "\n".join([*lines, message])


def _is_compile_error(e: BaseException) -> bool:
    """Triton rejected the kernel's source (on a GPU at compile time; under the interpreter, a
    language error raised from triton/language, which InterpreterError wraps)."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & {
        "CompilationError",
        "CompileTimeAssertionFailure",
        "OutOfResources",
        "PTXASError",
        "UnsupportedLanguageConstruct",
    }:
        return True
    language = f"{os.sep}triton{os.sep}language{os.sep}"
    for err in (e, e.__cause__):
        if err is None:
            continue
        tb = traceback.extract_tb(err.__traceback__)
        if any(language in f.filename for f in tb[-3:]):
            return True
        if isinstance(err, AttributeError) and "triton.language" in str(err):
            return True  # tl.foo: no such function
    return False


def _is_cuda_fault(e: BaseException) -> bool:
    text = str(e).lower()
    return any(
        s in text
        for s in (
            "cuda error",
            "illegal memory access",
            "misaligned address",
            "device-side assert",
            "unspecified launch failure",
        )
    )


def _interpreter_timings() -> Timings:
    return Timings(
        meaningful=False,
        note="no CUDA device: candidates ran under the Triton "
        "interpreter, which checks correctness only; times are not meaningful",
    )


def install_guard(home: Path, private: Path, also_trusted: Iterable[str] = ()) -> checks.Guard:
    """The worker's guard: candidate code writes only under `home` and reads only there and in
    the installation; `private` (torch.compile's generated code for the reference, which
    candidate code can neither read nor write) is the evaluator's own code.

    Under the candidate's home, inductor's generated modules counted as candidate code: torch's
    guard code generated while one was on the stack was then judged the candidate's, and timing
    the baseline of any task after a first candidate had run tripped the introspection rule.
    also_trusted: more directories of evaluator code (a test's harness).
    """
    guard = checks.Guard()
    guard.install(
        writable_roots=[str(home)],
        readable_roots=_readable_roots(home),
        trusted_code=[str(private), *also_trusted],
    )
    return guard


def _drop_from_import_path(home: Path) -> None:
    """`python -m` puts the working directory, the candidate's home, first on sys.path: a module
    the candidate wrote there would shadow any module the evaluator imports later (torch.compile
    of the next task, the profiler) and run as the evaluator's code. The candidate's own module
    is loaded by path and needs no entry."""
    real = os.path.realpath(home)
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.realpath(p) != real]


class _Stopwatch:
    """`with clock("step"):` adds the block's wall time to times["step"]."""

    def __init__(self, times: dict[str, float]):
        self.times = times

    @contextlib.contextmanager
    def __call__(self, name: str):
        started = time.monotonic()
        try:
            yield
        finally:
            self.times[name] = self.times.get(name, 0.0) + time.monotonic() - started


def _rounded(times: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in times.items()}


@contextlib.contextmanager
def _environ(name: str, value: str):
    """os.environ[name] = value for the block (Triton and inductor read their cache dir there)."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _readable_roots(home: Path) -> list[str]:
    roots = {
        str(home),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        "/usr",
        "/lib",
        "/lib64",
        "/etc",
        "/opt",
        "/proc/self",
        f"/proc/{os.getpid()}",
        "/sys",
        "/dev",
        "/bin",
        "/sbin",
        "/run/nvidia-persistenced",
    }
    roots.update(p for p in sys.path if p and os.path.isdir(p))
    return sorted(roots)


def _environment(torch, cuda: bool, layers: tuple[str, ...]) -> Environment:
    import triton

    gpu = driver = cuda_version = ""
    if cuda:
        gpu = torch.cuda.get_device_name(0)
        cuda_version = torch.version.cuda or ""
        from .roofline import driver_version

        driver = driver_version()
    return Environment(
        device="cuda" if cuda else "cpu",
        gpu=gpu,
        driver=driver,
        cuda=cuda_version,
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        interpreter=not cuda,
        isolation=layers,
    )


def _asdict(env: Environment) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(env)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--home", required=True)
    parser.add_argument("--private", required=True)
    parser.add_argument("--gpu-memory-fraction", type=float, default=0.9)
    parser.add_argument("--max-file-mb", type=int, default=512)
    args = parser.parse_args(argv)
    faulthandler.enable()  # a segfault leaves the Python stack in the log for the critic
    layers = set_limits(max_file_mb=args.max_file_mb)
    if isolate_network():
        layers.append("netns")
    os.set_inheritable(args.result_fd, False)  # Triton's compiler subprocesses must not get it
    out = os.fdopen(args.result_fd, "w", buffering=1)
    home = Path(args.home)
    _drop_from_import_path(home)
    os.chdir(home)
    worker = Worker(args.device, home, Path(args.private), out, layers, args.gpu_memory_fraction)
    worker.serve(sys.stdin)
    out.flush()
    return 0


if __name__ == "__main__":
    # Exit without running atexit handlers or finalizers a candidate may have registered.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
