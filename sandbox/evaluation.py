"""The judge's evaluation of one candidate: correctness, timing, the clock check and memory.

Runs in the judge (worker.py), which holds the reference, the float64 reference, the pristine
inputs, the tolerances and the roofline. The candidate runs in a process of its own
(candidate.py, behind the OS sandbox); this side sends it inputs and seeds, rebuilds its
outputs as plain tensors from the bytes it hands back, and decides. Any failure raises a
Verdict. The order of checks is the old worker's: trials with fresh seeds, the same tensors
refilled, determinism, repeated calls (drift), the other shape, then interleaved timing whose
every output is checked, the judge's own clock over a block of calls, the roofline and memory.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

from . import transport
from .remote import CandidateFailure
from .results import Correctness, EvalResult, KernelStats, Memory, Mismatch, Timings

# The judge's clock over a block of back-to-back calls may exceed the candidate's claimed
# per-call time by this factor, plus the GPU head start (host launch time the claimed time
# leaves out by design), plus the digest the candidate computes inside the block, plus a fixed
# allowance for the round trip. An honest kernel's block runs with a warm L2 and overlapped
# launches, faster per call than its flushed, timed calls; a claimed time below real work
# (patched events, work left for after the end event) shows as a block that takes longer.
# Not yet measured on a GPU: 1.5 leaves honest kernels room until the H200 says how close the
# two clocks run (benchmarks/RESULTS.md will carry the ratio); tighten it then.
CLOCK_FACTOR = 1.5
# The host clock of the evaluator's own tests (no CUDA): one interpreted call takes milliseconds
# and a loaded 2-core CI machine stretches one block by 1.6x against the timed calls (seen
# here); the exploit this is tested with hides 20x its claim.
HOST_CLOCK_FACTOR = 3.0
CLOCK_OVERHEAD_MS = 5.0
# Calls per block: enough to swamp the round trip for small kernels, few enough that the
# block's inputs and outputs fit beside everything else (BLOCK_BYTES of them at most).
BLOCK_CALLS = (2, 16)
BLOCK_BYTES = 4 << 30
# Every timed output travels to the judge through host memory to be checked (~10-20 GB/s each
# way): past this many bytes of outputs in all, fewer rounds are timed (at least MIN_TIMED_REPS;
# a median of 10 calls of a multi-GB kernel, each milliseconds long, is stable to ~1%).
TIMED_OUTPUT_BYTES = 32 << 30
MIN_TIMED_REPS = 10
# The candidate's peak may reach max(MEMORY_FACTOR x the reference's, reference + MEMORY_SLACK).
MEMORY_FACTOR = 4
MEMORY_SLACK = 1 << 30
_STATUSES_FROM_CANDIDATE = ("rejected", "compile_error", "runtime_error", "incorrect")


class Verdict(Exception):
    """Ends an evaluation with a status, the rule that fired, and a message for the critic."""

    def __init__(self, status: str, message: str, rule: str | None = None, recycle: bool = False):
        super().__init__(message)
        self.status, self.message, self.rule, self.recycle = status, message, rule, recycle


@dataclasses.dataclass
class _Opaque:
    """An output leaf that is not a plain strided tensor, by its type name."""

    name: str
    subclass: bool = False
    layout: str = ""


class Evaluation:
    """The checks on one candidate, in order; any failure raises a Verdict."""

    def __init__(self, worker, ctx, config, request, serial: int):
        self.w, self.ctx, self.config, self.request = worker, ctx, config, request
        self.torch = worker.torch
        self.serial = serial
        self.proc: Any = None  # the candidate process (remote.py), once spawned
        self.trials: list[int] = []  # seeds of the trials at the task's shape
        self.seeds: list[int] = []
        self.max_abs = self.max_rel = 0.0
        self.err64: float | None = None
        self.eager64: float | None = None
        self.limit64: float | None = None
        self.deterministic: bool | None = None
        self.mismatch: Mismatch | None = None
        self.shapes_checked: list[dict[str, int | tuple[int, ...]]] = []
        self.variant_checked = False
        self.phases: dict[str, float] = {}
        self.step = _Stopwatch(self.phases)
        self.timed_edge_cases = 0
        self.edge_elements = 0
        self.candidate_peak: int | None = None
        self.precision_where = "float64 reference on the evaluation device"
        self.stats: tuple[KernelStats, ...] = ()
        self.interpreter_notes: list[str] = []  # from the candidate process (tritoncompat)
        self.clock_note = ""
        self.judge_ms_per_call: float | None = None
        self.deadline = time.monotonic() + config.timeout_s
        if worker.cuda:
            self.torch.cuda.reset_peak_memory_stats()

    # -- the sequence --------------------------------------------------------------------------

    def run(self, base: dict[str, Any]) -> EvalResult:
        base = {**base, "phases_s": self.phases}
        with self.step("load"):
            self.start()
            self.build("main", self.ctx.main)
        with self.step("trials"):
            self.check_trials()
        with self.step("same_address"):
            self.check_same_address()
        with self.step("drift"):
            self.check_drift()
        with self.step("variant"):
            self.check_variant()
        self.check_memory()
        notes = self.notes()
        timed = self.config.timing and (self.w.cuda or self.config.host_clock_for_tests)
        if not timed:
            timings = (
                _interpreter_timings()
                if not self.w.cuda
                else Timings(meaningful=False, note="timing disabled")
            )
            self.stats = self.kernel_stats()
            notes += [n for n in self.interpreter_notes if n not in notes]
            return EvalResult(
                status="ok",
                correctness=self.correctness(),
                timings=timings,
                kernels=self.stats,
                memory=self.memory(),
                notes=tuple(notes),
                **base,
            )
        self.w.phase(self.request, "timing")
        self.deadline = time.monotonic() + self.config.timeout_s  # timing has a limit of its own
        with self.step("timing"):
            timings = self.time(remote=True)
        with self.step("clock"):
            self.clock_check(timings.candidate.median_ms)  # type: ignore[union-attr]  # time() sets it
        with self.step("drift"):
            self.check_drift(calls=1, after="after timing")
        timings = dataclasses.replace(
            timings,
            judge_ms_per_call=self.judge_ms_per_call,
            note=f"{timings.note}; {self.clock_note}" if self.clock_note else timings.note,
        )
        if self.timed_edge_cases:
            notes.append(
                f"{self.timed_edge_cases} timed output(s) differed from eager's beyond the "
                "allclose tolerance at some element but were as accurate as eager against a "
                "float64 reference (an ill-conditioned output: both are rounding differently)"
            )
        self.stats = self.kernel_stats()
        notes += [n for n in self.interpreter_notes if n not in notes]
        return self.timed_result(base, timings, notes)

    def notes(self) -> list[str]:
        notes = list(self.ctx.notes)
        if not self.w.cuda and self.ctx.dtype == self.torch.bfloat16:
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
        if self.w.sandbox_note:
            notes.append(self.w.sandbox_note)
        return notes

    def timed_result(self, base, timings: Timings, notes: list[str]) -> EvalResult:
        from .roofline import is_impossible, roofline

        cand = timings.candidate.median_ms  # type: ignore[union-attr]  # time() sets it
        if self.ctx.work is None:  # the host clock of the evaluator's own tests: no roofline
            return EvalResult(
                status="ok",
                correctness=self.correctness(),
                timings=timings,
                kernels=self.stats,
                memory=self.memory(),
                notes=tuple(notes),
                **base,
            )
        bytes_, flops = self.ctx.work
        rf = roofline(bytes_, flops, self.config.dtype, self.ctx.ceilings)
        rf = dataclasses.replace(rf, fraction=rf.bound_ms / cand if cand > 0 else None)
        for what, ms in (
            ("median time", cand),
            ("the judge's clock per call", self.judge_ms_per_call),
        ):
            if ms is not None and is_impossible(ms, rf.bound_ms):
                raise Verdict(
                    "rejected",
                    f"{what} {ms:.4f} ms is under the physical lower bound {rf.bound_ms:.4f} ms "
                    f"({bytes_ / 1e9:.3f} GB moved at {rf.bandwidth_gbps:.0f} GB/s, "
                    f"{flops / 1e9:.2f} GFLOP at {rf.peak_tflops:.0f} TFLOP/s): the measured time "
                    "cannot be the real work (memoised outputs, work hidden from the timer?)",
                    rule="roofline",
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
            kernels=self.stats,
            memory=self.memory(),
            notes=tuple(notes),
            **base,
        )

    # -- the candidate process -----------------------------------------------------------------

    def start(self) -> None:
        sandbox = self.w.sandbox()
        dtype = str(self.ctx.dtype).removeprefix("torch.")
        try:
            self.proc = sandbox.spawn(
                source=self.request["source"], dtype=dtype, config=self.config
            )
        except RuntimeError as e:
            raise Verdict("crashed", f"internal evaluator error: {e}", rule="worker-start") from e

    def req(
        self, message: dict[str, Any], fds: Sequence[int] = (), expect: tuple[str, ...] = ()
    ) -> transport.Received:
        """One request to the candidate process; its failures and refusals become Verdicts.

        expect: the keys the reply to this request carries; a message without them was not
        written by the evaluator's code in the candidate process (a forgery on its socket).
        """
        try:
            got = self.proc.request(message, fds, deadline=self.deadline)
        except CandidateFailure as f:
            raise Verdict(f.status, f.message, rule=f.rule, recycle=True) from None
        m = got.message
        for v in m.get("state") or []:
            got.close()
            raise Verdict("rejected", _text(v.get("message")), rule=_rule(v.get("rule")))
        if "error" in m:
            got.close()
            e = m["error"] if isinstance(m["error"], dict) else {}
            status = e.get("status")
            if status not in _STATUSES_FROM_CANDIDATE:
                status = "runtime_error"
            raise Verdict(status, _text(e.get("message")), rule=_rule(e.get("rule")))
        if "internal" in m:
            got.close()
            raise Verdict(
                "crashed",
                "the evaluator's own code in the candidate process failed (a kernelwright bug, or "
                f"a candidate that broke it):\n{_text(m['internal'])}",
                rule="harness",
            )
        missing = [k for k in expect if k not in m]
        if missing:
            got.close()
            raise Verdict(
                "rejected",
                f"the candidate process answered {message.get('op')} with a message lacking "
                f"{missing}: only the evaluator's own code may write to its channel",
                rule="protocol",
            )
        return got

    def build(self, name: str, shape) -> None:
        fds: list[int] = []
        params, buffers = [], []
        for pname, t in [*shape.ref.named_parameters(), *shape.ref.named_buffers()]:
            buffer, _ = transport.export(t.detach(), keep_layout=False)
            buffers.append(buffer)
            params.append(
                {"name": pname, "tensor": transport.describe(t, len(fds), contiguous=True)}
            )
            fds.append(buffer.fd)
        if len(fds) > transport.MAX_FDS:
            raise Verdict(
                "crashed",
                f"internal evaluator error: the task has {len(fds)} parameters and buffers, more "
                f"than one message carries ({transport.MAX_FDS})",
                rule="evaluator",
            )
        try:
            got = self.req(
                {
                    "op": "build",
                    "shape": name,
                    "task": _task_dict(self.ctx.task),
                    "overrides": shape.overrides,
                    "seed": shape.seed,
                    "training": shape.ref.training,
                    "out_meta": [
                        [list(s), str(d).removeprefix("torch.")] for s, d in shape.out_meta
                    ],
                    "params": params,
                },
                fds,
                expect=("ok",),
            )
            got.close()
        finally:
            for b in buffers:
                b.close()

    def call(self, name: str, inputs: list[Any], what: str, *, same_tensors: bool = False):
        """One checked call: (outputs as judge tensors, the inputs as forward left them)."""
        torch = self.torch
        descs: list[dict[str, Any]] = []
        fds: list[int] = []
        buffers: list[Any] = []
        views: list[Any] = []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                buffer, view = transport.export(x, keep_layout=True)
                buffers.append(buffer)
                views.append(view)
                descs.append({"tensor": transport.describe(x, len(fds), contiguous=False)})
                fds.append(buffer.fd)
            else:
                views.append(x)
                descs.append({"value": x})
        try:
            got = self.req(
                {
                    "op": "call",
                    "shape": name,
                    "inputs": descs,
                    "what": what,
                    "same_tensors": same_tensors,
                },
                fds,
                expect=("output", "facts"),
            )
            try:
                m = got.message
                for fact in m.get("facts") or []:
                    raise Verdict(
                        "rejected",
                        f"{what}: {_text(fact.get('message'))}",
                        rule=_rule(fact.get("rule")),
                    )
                peak = m.get("peak_bytes")
                if isinstance(peak, int) and peak >= 0:
                    self.candidate_peak = max(self.candidate_peak or 0, peak)
                out = self.rebuild(m.get("output"), got.fds, name, what)
                after = views
                if "inputs_after" in m:
                    after = [
                        self.materialise(d, got.fds, on_host=False) if d is not None else v
                        for d, v in zip(m["inputs_after"], views)
                    ]
                else:
                    after = [v.clone() if isinstance(v, torch.Tensor) else v for v in views]
            finally:
                got.close()
        finally:
            views.clear()
            for b in buffers:
                b.close()
        return out, after

    def rebuild(self, node: Any, fds: list[int], shape_name: str, what: str) -> Any:
        """The candidate's output as plain judge tensors, after its structure was checked."""
        shape = self.ctx.main if shape_name == "main" else self.ctx.variant
        problem = _structure(node, shape.out_template, "out", self.w.device.type)
        if problem is not None:
            rule, message = problem
            status = "rejected" if rule == "output-type" else "incorrect"
            raise Verdict(status, f"{what}: {message}", rule=rule)
        return self._materialise_tree(node, fds)

    def _materialise_tree(self, node: Any, fds: list[int]) -> Any:
        if "tuple" in node or "list" in node:
            items = [self._materialise_tree(v, fds) for v in node.get("tuple", node.get("list"))]
            return tuple(items) if "tuple" in node else items
        if "dict" in node:
            return {k: self._materialise_tree(v, fds) for k, v in node["dict"]}
        if "tensor" in node:
            return self.materialise(node["tensor"], fds, on_host=False)
        if "opaque" in node:
            return _Opaque(_text(node["opaque"]), bool(node.get("subclass")))
        return node.get("value")

    def materialise(self, desc: dict[str, Any], fds: list[int], *, on_host: bool):
        """A judge-owned copy of a tensor the candidate process described (a snapshot: the
        candidate cannot change it afterwards)."""
        limit = 4 * max(self.ctx.main.footprint, 1 << 20) + (1 << 30)
        try:
            buffer, host = transport.rebuild(desc, fds, max_bytes=limit)
        except (transport.ProtocolError, OSError) as e:
            raise Verdict(
                "rejected", f"the candidate process sent a malformed tensor: {e}", rule="protocol"
            ) from None
        try:
            same_kind = str(desc.get("device", "")).startswith(self.w.device.type)
            if on_host or not same_kind or self.w.device.type == "cpu":
                return host.clone()  # a copy: the mapping is closed below
            return host.to(self.w.device)
        finally:
            del host
            buffer.close()

    # -- correctness ---------------------------------------------------------------------------

    def fresh(self, shape) -> tuple[int, list[Any]]:
        from .task import build_inputs

        seed = self.w.rng.randrange(2**31)
        self.seeds.append(seed)
        return seed, build_inputs(shape.ns, self.ctx.dtype, self.w.device, seed)

    def regenerate(self, shape, seed: int) -> list[Any]:
        from .task import build_inputs

        return build_inputs(shape.ns, self.ctx.dtype, self.w.device, seed)

    def reference(self, shape, pristine: list[Any]) -> tuple[Any, Any]:
        """Eager's output and the float64 reference's; the latter on the host when the device
        has no room for it."""
        torch = self.torch
        with torch.no_grad():
            ref = shape.ref(*_clone(pristine, torch))
            if shape._ref64_host is None:
                try:
                    return ref, shape.ref64(*_to64(pristine, torch))
                except torch.cuda.OutOfMemoryError:
                    torch.cuda.empty_cache()
            host = shape.ref64_on_host()
            on_host = [x.cpu() if isinstance(x, torch.Tensor) else x for x in pristine]
            self.precision_where = (
                "float64 reference computed on the host: it did not fit on the device"
            )
            return ref, host(*_to64(on_host, torch))

    def checked_call(
        self, shape, name, args, what, *, hint="", rule=None, refs=None, same_tensors=False
    ):
        """Call the candidate, then check its inputs and its output against the reference. The
        reference runs after the candidate, so no freed block can hold the right answer.

        `args` stay the pristine copy: the candidate gets their bytes in shared memory, never
        these tensors. What forward left in its inputs is compared with them and let go before
        the reference runs (one trial's tensors alive at a time: the judge's working set).
        """
        out, after = self.call(name, args, what, same_tensors=same_tensors)
        self.check_inputs(after, args, what)
        del after
        ref, ref64 = refs if refs is not None else self.reference(shape, args)
        self.check_output(out, ref, ref64, f"{what}{hint}", rule=rule)
        return out

    def check_trials(self) -> None:
        shape = self.ctx.main
        self.shapes_checked.append(shape.sizes)
        for t in range(self.config.trials):
            seed, inputs = self.fresh(shape)
            self.checked_call(shape, "main", inputs, f"trial {t + 1}")
            self.trials.append(seed)

    def check_same_address(self) -> None:
        """New values in the same tensors (same data_ptr, same id) in the candidate process: a
        cache keyed on them fails; then the same values again, for determinism."""
        from .compare import same_bits

        shape = self.ctx.main
        _, inputs = self.fresh(shape)
        out = self.checked_call(
            shape,
            "main",
            inputs,
            "the call on the same input tensors refilled with new values",
            hint=" (a result cached by data_ptr or id would be stale)",
            rule="mismatch",
            same_tensors=True,
        )
        again = self.checked_call(shape, "main", inputs, "the determinism check", rule="drift")
        pairs = zip(_tensors(out, self.torch), _tensors(again, self.torch))
        self.deterministic = all(same_bits(a, b) for a, b in pairs)

    def check_drift(self, calls: int | None = None, after: str = "") -> None:
        n = self.config.drift_calls if calls is None else calls
        shape = self.ctx.main
        for k in range(n):
            args = self.regenerate(shape, self.trials[k % len(self.trials)])
            what = f"repeated call {k + 1}" + (f" {after}" if after else "")
            self.checked_call(
                shape,
                "main",
                args,
                what,
                hint=" (right before, wrong now: state kept across calls?)",
                rule="drift",
            )

    def check_variant(self) -> None:
        shape = self.ctx.variant
        if shape is None:
            return
        sizes = _sizes_text(shape.sizes)
        try:
            self.build("variant", shape)
            _, inputs = self.fresh(shape)
            self.checked_call(
                shape,
                "variant",
                inputs,
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

    def check_inputs(self, after: list[Any], pristine: list[Any], what: str) -> None:
        from .compare import same_bits

        for i, (a, b) in enumerate(zip(after, pristine)):
            if isinstance(b, self.torch.Tensor) and not (
                isinstance(a, self.torch.Tensor) and same_bits(a.to(b.device), b)
            ):
                raise Verdict(
                    "rejected",
                    f"{what}: the candidate modified input {i} in place "
                    "(inputs are checked after every call)",
                    rule="input-mutation",
                )

    def check_output(self, out, ref, ref64, what: str, rule: str | None = None) -> None:
        from .compare import (
            compare,
            error_stats,
            flatten_outputs,
            has_bad_values,
            precision_limit,
            rel_error,
        )

        torch = self.torch
        named_out, named_ref64 = dict(flatten_outputs(out)), dict(flatten_outputs(ref64))
        for name, r in flatten_outputs(ref):
            o = named_out[name]
            if not isinstance(r, torch.Tensor):
                continue
            mismatch = compare(o, r, self.ctx.dtype)
            if mismatch is not None and named_ref64.get(name) is not None:
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

    # -- memory --------------------------------------------------------------------------------

    def limit_bytes(self) -> int | None:
        if self.config.max_memory_gb is not None:
            return int(self.config.max_memory_gb * 2**30)
        ref = self.ctx.main.ref_peak
        return None if ref is None else max(MEMORY_FACTOR * ref, ref + MEMORY_SLACK)

    def check_memory(self) -> None:
        limit, peak = self.limit_bytes(), self.candidate_peak
        if limit is None or peak is None or peak <= limit:
            return
        ref = self.ctx.main.ref_peak
        raise Verdict(
            "rejected",
            f"the candidate's forward peaked at {_gib(peak)} of device memory; the reference "
            f"peaks at {_gib(ref)} and a candidate may use max({MEMORY_FACTOR}x that, that + "
            f"1 GiB) = {_gib(limit)}. Allocate less (no workspace sized far beyond the task), or "
            "allow it with --max-memory GB.",
            rule="memory",
        )

    def memory(self) -> Memory:
        shape = self.ctx.main
        judge = self.torch.cuda.max_memory_allocated() if self.w.cuda else None
        note = (
            ""
            if self.w.cuda
            else ("device memory is measured on CUDA only (the interpreter runs in host memory)")
        )
        return Memory(
            footprint_bytes=shape.footprint,
            reference_peak_bytes=shape.ref_peak,
            candidate_peak_bytes=self.candidate_peak,
            judge_peak_bytes=judge,
            limit_bytes=self.limit_bytes(),
            note=note,
        )

    # -- timing --------------------------------------------------------------------------------

    def time(self, remote: bool) -> Timings:
        """Interleaved timing of eager, torch.compile and (remote) the candidate.

        Every round draws fresh inputs from a new seed; eager and torch.compile draw them here,
        the candidate process draws the same ones from the same seed. The candidate's output of
        every round is checked against eager's of the same round.
        """
        from .compare import compare, flatten_outputs
        from .task import build_inputs
        from .timing import time_interleaved

        torch, ctx, cfg = self.torch, self.ctx, self.config
        rounds: dict[int, dict[str, Any]] = {}

        def seed_of(i: int) -> int:
            if i not in rounds:
                rounds[i] = {"seed": self.w.rng.randrange(2**31)}
            return rounds[i]["seed"]

        def prepare(i):
            return build_inputs(ctx.main.ns, ctx.dtype, self.w.device, seed_of(i))

        def eager(*args):
            with torch.no_grad():
                return ctx.main.ref(*args)

        fns: dict[str, Any] = {"eager": (prepare, eager)}
        if ctx.compiled is not None:

            def compiled(*args):
                with torch.no_grad():
                    return ctx.compiled(*args)

            fns["compiled"] = (prepare, compiled)
        failures: list[tuple[str, str]] = []
        if remote:
            fns["candidate"] = _RemoteRunner(self, seed_of)

        def after_call(name, i, out, args):
            state = rounds[i]
            state[name] = True
            if name == "candidate" and not failures:
                state["candidate_out"] = out
            elif name == "eager" and remote:
                state["eager_out"] = out
            if "candidate_out" in state and "eager_out" in state and not failures:
                out, ref = state.pop("candidate_out"), state.pop("eager_out")
                pairs = zip(flatten_outputs(out), flatten_outputs(ref))
                if any(
                    isinstance(r, torch.Tensor) and compare(o, r, ctx.dtype) is not None
                    for (_, o), (_, r) in pairs
                ):
                    pristine = self.regenerate(ctx.main, state["seed"])
                    self.judge_timed_mismatch(i, out, ref, pristine, failures)
            if all(n in state for n in fns):
                del rounds[i]

        reps = _timed_reps(cfg.reps, ctx.main.output_bytes if remote else 0)
        samples = time_interleaved(
            fns,
            reps=reps,
            warmup=cfg.warmup,
            l2_flush=cfg.l2_flush,
            after_call=after_call,
            cuda_graphs=cfg.cuda_graphs,
            head_start_us=cfg.head_start_us,
            host_clock=cfg.host_clock_for_tests or not self.w.cuda,
        )
        if failures:
            rule, what = failures[0]
            raise Verdict(
                "incorrect",
                f"{what} (outputs of timed calls are checked too: "
                "right during the checks, wrong while timed)",
                rule=rule,
            )
        return Timings(
            meaningful=self.w.cuda and not cfg.host_clock_for_tests,
            note=(
                f"median of {reps} interleaved calls, fresh inputs every round, "
                f"L2 flushed: {cfg.l2_flush}, GPU head start: {cfg.head_start_us:g} us"
            ),
            candidate=samples.get("candidate"),
            eager=samples.get("eager"),
            compiled=samples.get("compiled"),
            compiled_error=ctx.compiled_error,
            cuda_graphs=cfg.cuda_graphs,
        )

    def judge_timed_mismatch(self, i: int, out, ref, pristine: list, failures: list) -> None:
        """A timed output outside the allclose tolerance of eager's, on inputs no check has seen.

        On an ill-conditioned output two equally accurate fp32 results can differ by more than
        the tolerance at an element or two (measured on the H200: level2/06). The float64
        reference of the round decides, as in the checks: an output within the precision limit
        and compare's float64-widened tolerance passes, with a note; a memoised, stale or
        partial output is orders of magnitude past both.
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

    def clock_check(self, claimed_ms: float) -> None:
        """The judge's own wall clock over N back-to-back calls against the claimed time.

        The candidate process draws N fresh input sets (outside the clock), then, on the
        judge's request, runs N calls, synchronizes and returns a digest of every output salted
        with a number it learns only then. The judge's clock runs from that request to the
        reply. It then fetches one output it picks at random, checks it against eager's on the
        same inputs, and checks that its digest was the one returned inside the clock: the
        work had to be done while the judge watched.
        """
        from .candidate import digest
        from .compare import compare, flatten_outputs

        torch, ctx = self.torch, self.ctx
        rng = self.w.rng
        per_call = ctx.main.input_bytes + ctx.main.output_bytes
        n = max(BLOCK_CALLS[0], min(BLOCK_CALLS[1], BLOCK_BYTES // max(per_call, 1)))
        seeds = [rng.randrange(2**31) for _ in range(n)]
        self.req({"op": "block_prepare", "seeds": seeds}, expect=("ready",)).close()
        salt = rng.randrange(1, 2**31)
        started = time.perf_counter()
        got = self.req({"op": "block_run", "salt": salt}, expect=("digests",))
        wall_ms = (time.perf_counter() - started) * 1000.0
        digests = got.message.get("digests")
        got.close()
        if not (isinstance(digests, list) and len(digests) == n):
            raise Verdict("rejected", "the clock check got no digest per call", rule="clock")
        k = rng.randrange(n)
        got = self.req({"op": "block_fetch", "index": k}, expect=("output",))
        try:
            out = self.rebuild(
                got.message.get("output"), got.fds, "main", "a call of the clock check"
            )
        finally:
            got.close()
        inputs = self.regenerate(ctx.main, seeds[k])
        with torch.no_grad():
            ref = ctx.main.ref(*inputs)
        if compare(out, ref, ctx.dtype) is not None:
            failures: list[tuple[str, str]] = []
            self.judge_timed_mismatch(k, out, ref, inputs, failures)
            if failures:
                raise Verdict(
                    "incorrect", f"the clock check's call {k}: {failures[0][1]}", rule="drift"
                )
        leaves = [t for _, t in flatten_outputs(out) if isinstance(t, torch.Tensor)]
        started = time.perf_counter()
        mine = [digest(t, salt) for t in leaves]
        if self.w.cuda:
            torch.cuda.synchronize()
        digest_ms = (time.perf_counter() - started) * 1000.0
        if digests[k] != mine:
            raise Verdict(
                "rejected",
                "the output fetched after the clock check is not the one the candidate process "
                "reported inside it: the work was done after the judge's clock stopped",
                rule="clock",
            )
        host = self.config.host_clock_for_tests or not self.w.cuda
        head_start_ms = 0.0 if host else self.config.head_start_us / 1000
        factor = HOST_CLOCK_FACTOR if host else CLOCK_FACTOR
        bound = n * (factor * claimed_ms + head_start_ms + digest_ms) + CLOCK_OVERHEAD_MS
        self.judge_ms_per_call = wall_ms / n
        self.clock_note = (
            f"judge's clock: {n} back-to-back calls in {wall_ms:.3f} ms "
            f"({wall_ms / n:.4f} ms per call, digest {digest_ms:.4f} ms) vs {claimed_ms:.4f} ms "
            f"claimed, bound {bound:.3f} ms"
        )
        if wall_ms > bound:
            raise Verdict(
                "rejected",
                f"the candidate claims {claimed_ms:.4f} ms per call, but the judge's own clock "
                f"measured {n} back-to-back calls in {wall_ms:.3f} ms ({wall_ms / n:.4f} ms per "
                f"call; allowed {bound:.3f} ms: {factor}x the claim plus the head start, "
                "the digest and the round trip). Times are measured by the evaluator: a patched "
                "timer or work left for later is found this way.",
                rule="clock",
            )

    # -- reporting -----------------------------------------------------------------------------

    def kernels_so_far(self) -> tuple[KernelStats, ...]:
        """Kernel statistics for a verdict before the end (the candidate process may be gone)."""
        if self.stats or self.proc is None or self.proc.ended is not None:
            return self.stats
        return self.kernel_stats()

    def kernel_stats(self) -> tuple[KernelStats, ...]:
        with contextlib.suppress(Verdict):
            got = self.req({"op": "stats"}, expect=("kernels",))
            kernels = got.message.get("kernels") or []
            said = got.message.get("notes")
            got.close()
            if isinstance(said, list):  # the candidate process's word, so only short strings
                self.interpreter_notes = [n[:300] for n in said[:8] if isinstance(n, str)]
            out = []
            fields = {f.name for f in dataclasses.fields(KernelStats)}
            for k in kernels[:32]:
                with contextlib.suppress(TypeError, ValueError, KeyError):
                    out.append(KernelStats(**{n: v for n, v in k.items() if n in fields}))
            return tuple(out)
        return ()

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
            precision_judged=self.precision_where,
            max_abs_err=self.max_abs,
            max_rel_err=self.max_rel,
            err_vs_fp64=self.err64,
            eager_err_vs_fp64=self.eager64,
            precision_limit=self.limit64,
            deterministic=self.deterministic,
            degenerate_task=self.ctx.degenerate,
            mismatch=self.mismatch,
        )

    def cleanup(self) -> None:
        if self.proc is not None:
            self.proc.close()
            self.proc = None
        if self.w.cuda:
            with contextlib.suppress(Exception):
                self.torch.cuda.empty_cache()


class _RemoteRunner:
    """The candidate as a contender of time_interleaved: each timed call runs in its process."""

    def __init__(self, evaluation: Evaluation, seed_of):
        self.e, self.seed_of = evaluation, seed_of

    def timed(self, i: int, flush, spin_cycles: int = 0):
        cfg = self.e.config
        got = self.e.req(
            {
                "op": "time",
                "seed": self.seed_of(i),
                "round": i,
                "flush": bool(cfg.l2_flush),
                "spin": int(spin_cycles),
                "cuda_graphs": bool(cfg.cuda_graphs),
                "host_clock": bool(cfg.host_clock_for_tests or not self.e.w.cuda),
            },
            expect=("ms", "output"),
        )
        try:
            ms = got.message.get("ms")
            if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
                raise Verdict(
                    "rejected",
                    f"the candidate process claimed a time of {str(ms)[:40]}",
                    rule="clock",
                )
            out = self.e.rebuild(got.message.get("output"), got.fds, "main", f"timed call {i}")
        finally:
            got.close()
        return float(ms), out, None


# -- small pure helpers ----------------------------------------------------------------------------


def _timed_reps(reps: int, output_bytes: int) -> int:
    """The timed rounds: `reps`, fewer for outputs so large that checking each costs seconds."""
    if output_bytes <= 0:
        return reps
    return max(min(reps, MIN_TIMED_REPS), min(reps, TIMED_OUTPUT_BYTES // output_bytes))


def _structure(node: Any, ref: Any, path: str, device: str) -> tuple[str, str] | None:
    """compare.check_structure over the candidate's description of its output."""
    torch = transport.torch
    if not isinstance(node, dict):
        return "output-type", f"{path}: the candidate process described no output"
    if isinstance(ref, (tuple, list)):
        items = node.get("tuple", node.get("list"))
        if not isinstance(items, list):
            return "output-type", f"{path} is a {_node_kind(node)}, expected a {type(ref).__name__}"
        if len(items) != len(ref):
            return "shape", f"{path} has {len(items)} outputs, expected {len(ref)}"
        for i, (o, r) in enumerate(zip(items, ref)):
            problem = _structure(o, r, f"{path}[{i}]", device)
            if problem:
                return problem
        return None
    if isinstance(ref, dict):
        pairs = node.get("dict")
        keys = {repr(k)[:200]: k for k in ref}
        if not isinstance(pairs, list) or {p[0] for p in pairs if isinstance(p, list) and p} != set(
            keys
        ):
            return (
                "output-type",
                f"{path} is a {_node_kind(node)}, expected a dict with keys {list(ref)}",
            )
        node_map = {p[0]: p[1] for p in pairs}
        for text, k in keys.items():
            problem = _structure(node_map[text], ref[k], f"{path}[{k!r}]", device)
            if problem:
                return problem
        # The judge keys the rebuilt dict as the reference does.
        node["dict"] = [[keys[t], v] for t, v in node_map.items()]
        return None
    if isinstance(ref, torch.Tensor):
        if "opaque" in node:
            what = f"a {_text(node['opaque'])}" + (
                " (a torch.Tensor subclass)" if node.get("subclass") else ""
            )
            if (
                node.get("layout")
                and node.get("layout") != "torch.strided"
                and not node.get("subclass")
            ):
                return (
                    "output-type",
                    f"{path} has layout {node['layout']}; return a dense (strided) tensor",
                )
            return "output-type", f"{path} is {what}; return a plain torch.Tensor"
        desc = node.get("tensor")
        if not isinstance(desc, dict):
            return "output-type", f"{path} is a {_node_kind(node)}; return a plain torch.Tensor"
        if desc.get("shape") != list(ref.shape):
            return (
                "shape",
                f"{path} has shape {tuple(desc.get('shape') or ())}, expected {tuple(ref.shape)}",
            )
        if desc.get("dtype") != str(ref.dtype).removeprefix("torch."):
            return (
                "dtype",
                f"{path} has dtype torch.{_text(desc.get('dtype'))}, expected {ref.dtype}",
            )
        if not str(desc.get("device", "")).startswith(device):
            return "device", f"{path} is on {_text(desc.get('device'))}, expected {device}"
        return None
    value = node.get("value") if "value" in node else _Opaque(_text(node.get("opaque")))
    numbers = (int, float)
    if type(value) is not type(ref) and not (
        isinstance(value, numbers) and isinstance(ref, numbers)
    ):
        return "output-type", f"{path} is a {_node_kind(node)}, expected a {type(ref).__name__}"
    return None


def _node_kind(node: Any) -> str:
    if not isinstance(node, dict):
        return "nothing"
    for k in ("tuple", "list", "dict"):
        if k in node:
            return k
    if "tensor" in node:
        return "Tensor"
    if "opaque" in node:
        return _text(node["opaque"]).rsplit(".", 1)[-1]
    return type(node.get("value")).__name__


def _task_dict(task) -> dict[str, Any]:
    return {
        "path": task.path,
        "name": task.name,
        "source": task.source,
        "constants": dict(task.constants),
        "overrides": dict(task.overrides),
    }


def _text(value: Any, limit: int = 4000) -> str:
    return str(value)[:limit] if value is not None else ""


def _rule(value: Any) -> str | None:
    return str(value)[:40] if value is not None else None


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**30:.2f} GiB"


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


def _mismatch_text(m: Mismatch) -> str:
    first = "; ".join(
        f"at {list(idx)} got {got:.6g} expected {exp:.6g}" for idx, got, exp in m.first_bad[:3]
    )
    return (
        f"{m.output}: {m.count} of {m.total} elements differ "
        f"(max abs error {m.max_abs_err:.3g}, max rel error {m.max_rel_err:.3g}); {first}"
    )


def _sizes_text(sizes: dict[str, int | tuple[int, ...]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "(no size constants)"


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _interpreter_timings() -> Timings:
    return Timings(
        meaningful=False,
        note="no CUDA device: candidates ran under the Triton "
        "interpreter, which checks correctness only; times are not meaningful",
    )


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
