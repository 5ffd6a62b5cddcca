"""The judge: a warm process that holds a task's reference and judges candidates run elsewhere.

Started by pool.py as `python -m kernelwright.sandbox.judge.worker --result-fd N --device D
--home DIR --private DIR` in its own session, with an allowlisted environment. Requests arrive
as JSON lines on stdin; replies go out as JSON lines on the result descriptor. No candidate code
ever runs in this process: each candidate runs in a fresh process forked from a sandboxed zygote
(remote.py, zygote.py, process.py), and this process sees only the bytes of its outputs.

A judge keeps torch imported and, per task, the reference models, their outputs' layout, the
torch.compile baseline and the roofline, so the next candidate pays only for its own process,
CUDA context, compile and calls. HOME holds the candidates' directories (the only place the
sandbox can write); PRIVATE holds torch.compile's caches for the reference and the candidates'
device allocator (arena.c, built here, bound read-only into the sandbox).

What it holds of a task is shape.py's (Shape, TaskContext); the machine its results name,
machine.py's.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import dataclasses
import faulthandler
import gc
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ..config import EvalConfig
from ..crossing.isolation import isolate_network, set_limits
from ..results import Baseline, EvalResult, Timings
from .evaluation import Evaluation
from .machine import environment_dict, judge_environment, sandbox_device
from .opbreakdown import op_breakdown
from .remote import Sandbox
from .shape import Shape, TaskContext, float_dtype_of, nbytes, template_of
from .timed import _interpreter_timings
from .verdict import Verdict, _one_line, _sizes_text, _Stopwatch

# A warm judge is still replaced now and then: torch's caches only grow. Candidates never leave
# anything behind here: each ran in a process of its own.
_MAX_EVALUATIONS_PER_WORKER = 256
# Attempts at a valid "other shape" before recording that only the default shape was checked.
_MAX_VARIANT_ATTEMPTS = 6
# An exclusive hold waits for a quiet device (Worker.settle_device): this many one-element ops
# in a row, each returning within QUIET_PROBE_MS (tens of microseconds on a quiet H100/H200;
# another process's work makes it wait for that process's time slice), or QUIET_WAIT_S at most.
QUIET_PROBES = 3
QUIET_PROBE_MS = 0.25
QUIET_WAIT_S = 5.0


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
        sandbox: Sandbox | None = None,
        os_sandbox: bool = True,
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
        from .gpugate import GpuGate, device_key

        # The device's gate, shared with every other judge of this GPU (gpugate.py).
        self.gate = GpuGate(device_key(torch, 0) if self.cuda else None)
        self._probe: Any = None  # settle_device's one-element tensor
        self.busy_s = 0.0  # seconds exclusive holds waited for the device to be quiet
        self.never_quiet = 0  # exclusive holds that began on a device never quiet
        self.busy_streak = 0  # of those, in a row up to the last hold
        self.request: dict[str, Any] | None = None  # the request being answered
        self.contexts: collections.OrderedDict[tuple, TaskContext] = collections.OrderedDict()
        self.evaluations = 0
        self.rng = random.SystemRandom()  # fresh seeds: a candidate cannot predict its inputs
        self.os_sandbox = os_sandbox
        self.triton_seed: Path | None = None
        self.allocator: Path | None = None
        # The rest of the start (the launcher and allocator builds, the zygote's imports: seconds
        # of CPU) holds the gate shared, so it never runs beside another judge's timed section:
        # measured on the H100 with 8 judges started at once, the first judges' calibrations
        # beside the others' starts took eager to 0.0001 ms and a wall's share 0.014 ms too large.
        with self.held("shared"):
            if self.cuda:
                self.triton_seed = self._seed_triton_cache()
                from ..crossing.arena import build_allocator

                self.allocator = build_allocator(self.private / "allocator")
            self._sandbox = sandbox or self._new_sandbox()
            self._sandbox.wait_ready()
        self.sandbox_note = self._sandbox.note
        # The candidate's layers (the sandbox's, then the audit hook inside its interpreter),
        # then the judge's own limits.
        held = tuple(dict.fromkeys([*self._sandbox.layers, "audit-hook", *layers]))
        self.environment = judge_environment(torch, self.cuda, held, self.sandbox_note)

    def _new_sandbox(self) -> Sandbox:
        return Sandbox(
            sandbox_device(self.torch, self.cuda),
            self.home,
            os_sandbox=self.os_sandbox,
            triton_seed=self.triton_seed,
            allocator=self.allocator,
        )

    def _seed_triton_cache(self) -> Path:
        """Triton's driver module and one launcher, built here by trusted code: every candidate
        process starts with a copy of this cache, so it does not compile them again (~1-2 s of
        C compiler each). A candidate's own cache is never copied to another."""
        from ..crossing.warmup import warm_up

        seed = self.home / "triton-seed"
        with _environ("TRITON_CACHE_DIR", str(seed)):
            warm_up(self.device)
        return seed

    def sandbox(self) -> Sandbox:
        """The zygote candidates fork from; a new one if a candidate took the last one down."""
        if not self._sandbox.alive():
            self._sandbox.close()
            self._sandbox = self._new_sandbox()
        return self._sandbox

    # -- protocol ------------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def held(self, mode: str, **callbacks):
        """The GPU's gate in `mode` for a block (gpugate.py); the pool's watchdog is told while
        this judge waits for it, so the wait is no one's wall time. An exclusive hold begins
        once the device is quiet (`settle_device`), before its after_acquire."""
        if mode == "exclusive" and self.cuda:
            then = callbacks.get("after_acquire")

            def after_acquire() -> None:  # also run when a shared hold is taken back after it
                if self.gate.held == "exclusive":
                    self.settle_device()
                if then is not None:
                    then()

            callbacks["after_acquire"] = after_acquire
        return self.gate.hold(mode, on_wait=self._on_wait(), **callbacks)

    def yield_gate(self, **callbacks) -> float:
        """Held shared: let a judge waiting to time in, then hold shared again (gpugate.py's
        yield_turn); the seconds waited, 0.0 when nobody waited."""
        return self.gate.yield_turn(on_wait=self._on_wait(), **callbacks)

    def _on_wait(self):
        request = self.request

        def on_wait(waiting: bool) -> None:
            if request is not None:
                self.send(
                    {
                        "type": "gate",
                        "id": request["id"],
                        "nonce": request["nonce"],
                        "waiting": waiting,
                    }
                )

        return on_wait

    def settle_device(self) -> None:
        """Hold off until no other process's work runs on the device: a judge that let go of
        the gate stopped its candidate's process, but what that process had queued still runs,
        and it would slow this judge's rounds (eager's or the wall's made slower make a
        candidate faster than it is). The GPU time-slices between processes, so a one-element
        op and its synchronize return in tens of microseconds on a quiet device and after
        another's time slice on a busy one; QUIET_PROBES quick ones in a row, or QUIET_WAIT_S
        (the waiting is counted in `busy_s`, and a device never quiet is said in the note)."""
        torch = self.torch
        if self._probe is None:
            self._probe = torch.zeros(1, device=self.device)
        started = time.monotonic()
        # A device busy with a process that is no judge's (another user's job) would cost every
        # exclusive hold the whole wait: after a few such holds in a row, a short one.
        limit = QUIET_WAIT_S if self.busy_streak < 3 else QUIET_WAIT_S / 50
        quick = 0
        while quick < QUIET_PROBES and time.monotonic() - started < limit:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            self._probe.add_(1.0)
            torch.cuda.synchronize()
            if (time.perf_counter() - t0) * 1e3 <= QUIET_PROBE_MS:
                quick += 1
            else:
                quick = 0
                time.sleep(0.0005)
        self.busy_s += time.monotonic() - started
        if quick < QUIET_PROBES:
            self.never_quiet += 1
            self.busy_streak += 1
        else:
            self.busy_streak = 0

    def serve(self, stdin) -> None:
        self.send(
            {"type": "ready", "pid": os.getpid(), "environment": environment_dict(self.environment)}
        )
        for line in stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            self.request = request
            reply, recycle = self.handle(request)
            self.request = None
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
            last = traceback.format_exception_only(e)[-1].strip()
            # The first line is what every summary shows: it names the error, the trace follows.
            message = (
                f"internal evaluator error (a bug in kernelwright, not the candidate): {last}\n"
            )
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
        from ..task import Task

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
        from ..task import DTYPES

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
        from ..task import build_inputs, build_reference, task_namespace
        from .compare import flatten_outputs

        torch = self.torch
        ns = task_namespace(task, overrides)
        torch.manual_seed(seed)
        init_inputs = list(ns["get_init_inputs"]())
        ref = build_reference(ns, dtype, self.device, seed)
        ref64 = copy.deepcopy(ref).to(torch.float64)
        inputs = build_inputs(ns, dtype, self.device, seed + 1)
        if self.cuda:
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            out = ref(*inputs)
        leaves = [v for _, v in flatten_outputs(out) if isinstance(v, torch.Tensor)]
        meta = [(tuple(v.shape), v.dtype) for v in leaves]
        params = [*ref.parameters(), *ref.buffers()]
        shape = Shape(
            {**task.constants, **overrides},
            ns,
            init_inputs,
            ref,
            ref64,
            meta,
            overrides=dict(overrides),
            seed=seed,
            out_template=template_of(out, torch),
            input_bytes=nbytes([x for x in inputs if isinstance(x, torch.Tensor)]),
            output_bytes=nbytes(leaves),
            param_bytes=nbytes(params),
        )
        if self.cuda:
            torch.cuda.synchronize()
            # What one call needs: its inputs and the parameters, plus what forward allocates.
            extra = torch.cuda.max_memory_allocated() - before
            shape.ref_peak = extra + shape.input_bytes + shape.param_bytes
        return shape, out

    def _inputs_ignore_seed(self, shape: Shape) -> bool:
        """True when two draws with different seeds give bitwise the same floating inputs."""
        from ..task import build_inputs
        from .compare import same_bits

        dtype = float_dtype_of(shape.ref, self.torch)
        a, b = (build_inputs(shape.ns, dtype, self.device, self.rng.randrange(2**31)) for _ in "ab")
        pairs = [
            (x, y)
            for x, y in zip(a, b)
            if isinstance(x, self.torch.Tensor) and x.is_floating_point() and x.numel() > 1
        ]
        return bool(pairs) and all(same_bits(x, y) for x, y in pairs)

    def _is_degenerate(self, shape: Shape, out_a) -> bool:
        from ..task import build_inputs
        from .compare import flatten_outputs, same_bits

        inputs = build_inputs(
            shape.ns, float_dtype_of(shape.ref, self.torch), self.device, self.rng.randrange(2**31)
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
        from ..task import variant_note, variant_overrides

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
        from ..task import build_inputs
        from .roofline import count_work, measure_ceilings

        torch = self.torch
        clock = _Stopwatch(ctx.setup_s)
        inputs = build_inputs(ctx.main.ns, ctx.dtype, self.device, seed + 3)
        with clock("work_count"), torch.no_grad():
            out = ctx.main.ref(*inputs)
            ctx.work = count_work(ctx.main.ref, inputs, out)
        with clock("device_ceilings"), self.held("exclusive"):  # measured, when not cached
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
        # The GPU's gate, shared while the judge checks (Evaluation takes it exclusive for the
        # timed sections and stops the candidate's process whenever it lets go of it), until
        # the candidate's process and memory are gone.
        with self.held("shared"):
            result = self._evaluate(request, config, base)
        wall = time.monotonic() - started
        # The judge ran no candidate code: whatever the candidate did, this process is sound.
        return dataclasses.replace(result, wall_s=round(wall, 3)), False

    def _evaluate(self, request: dict[str, Any], config: EvalConfig, base) -> EvalResult:
        evaluation = None
        try:
            ctx = self.context(request, config)
            self.phase(request, "candidate")
            evaluation = Evaluation(self, ctx, config, request, self.evaluations)
            result = evaluation.run(base)
        except Verdict as v:
            result = EvalResult(
                status=v.status,  # type: ignore[arg-type]  # a Verdict's status is a Status
                rule=v.rule,
                message=v.message,
                correctness=evaluation.correctness() if evaluation else None,
                kernels=evaluation.kernels_so_far() if evaluation else (),
                memory=evaluation.memory() if evaluation else None,
                notes=(self.sandbox_note,) if self.sandbox_note else (),
                **base,
            )
        finally:
            if evaluation is not None:
                evaluation.cleanup()
        return result

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
            with self.held("shared"):
                ctx = self.context(request, config)
        except Verdict as v:
            return Baseline(status="error", message=v.message, **base)
        setup = dict(ctx.setup_s)
        clock = _Stopwatch(setup)
        with clock("op_breakdown"), self.held("exclusive"):  # the profiler's times
            ops, ops_note = op_breakdown(self.torch, ctx, self.device, self.rng.randrange(2**31))
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
        try:
            with clock("timing"), self.held("exclusive"):
                timings = self._baseline_timings(ctx, config, request)
        except Verdict as v:  # its rounds under the physical bound, every try: the evaluator's
            return Baseline(
                status="crashed",
                message=v.message,
                ops=ops,
                ops_note=ops_note,
                **base,
                wall_s=time.monotonic() - started,
                setup_s=_rounded(setup),
            )
        bytes_, flops = ctx.work  # type: ignore[misc]  # context() counted it
        rf = roofline(bytes_, flops, config.dtype, ctx.ceilings, config.precision)
        rf = dataclasses.replace(rf, fraction=rf.policy_ms / timings.eager.median_ms)  # type: ignore[union-attr]
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

    def _baseline_timings(self, ctx: TaskContext, config: EvalConfig, request) -> Timings:
        """Eager and torch.compile by the judge's clock, as every candidate's evaluation times
        them (timed.py), with no candidate at all."""
        e = Evaluation(self, ctx, config, request, self.evaluations)
        try:
            calls = e.plan_round()
            e.open_region("main", ctx.main, calls)
            samples = e.measured_baseline(calls)
        finally:
            e.cleanup()
        return Timings(
            meaningful=True,
            note=f"the judge's clock: median of {e.timed_reps()} rounds of {calls} call(s), "
            "fresh inputs written before the clock started"
            + (f" (measured {e.baseline_tries} times)" if e.baseline_tries > 1 else ""),
            eager=samples.get("eager"),
            compiled=samples.get("compiled"),
            compiled_error=ctx.compiled_error,
        )

    # -- helpers -------------------------------------------------------------------------------


# -- small pure helpers ----------------------------------------------------------------------------


def _drop_from_import_path(home: Path) -> None:
    """`python -m` puts the working directory, the candidate's home, first on sys.path: a module
    the candidate wrote there would shadow any module the evaluator imports later (torch.compile
    of the next task, the profiler) and run as the evaluator's code. The candidate's own module
    is loaded by path and needs no entry."""
    real = os.path.realpath(home)
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.realpath(p) != real]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--home", required=True)
    parser.add_argument("--private", required=True)
    parser.add_argument("--gpu-memory-fraction", type=float, default=0.9)
    parser.add_argument("--max-file-mb", type=int, default=512)
    parser.add_argument("--no-os-sandbox", action="store_true")
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
    # On CPU the zygote starts now and imports torch while this process does; on a GPU it needs
    # the device's node, known once torch has initialised CUDA here.
    sandbox = (
        Sandbox("cpu", home, os_sandbox=not args.no_os_sandbox) if args.device == "cpu" else None
    )
    worker = Worker(
        args.device,
        home,
        Path(args.private),
        out,
        layers,
        args.gpu_memory_fraction,
        sandbox=sandbox,
        os_sandbox=not args.no_os_sandbox,
    )
    worker.serve(sys.stdin)
    out.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
