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
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from . import transport
from .remote import CandidateFailure
from .results import Correctness, EvalResult, KernelStats, Memory, Mismatch, Timings
from .timed import TimedChecks, _interpreter_timings
from .verdict import (
    Verdict,
    _clone,
    _gib,
    _mismatch_text,
    _Opaque,
    _rule,
    _sizes_text,
    _Stopwatch,
    _structure,
    _task_dict,
    _tensors,
    _text,
    _to64,
)

# The candidate's peak may reach max(MEMORY_FACTOR x the reference's, reference + MEMORY_SLACK).
MEMORY_FACTOR = 4
MEMORY_SLACK = 1 << 30
_STATUSES_FROM_CANDIDATE = ("rejected", "compile_error", "runtime_error", "incorrect")


class Evaluation(TimedChecks):
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
        named = [*shape.ref.named_parameters(), *shape.ref.named_buffers()]
        # One memfd for all of them: a level-3 model has hundreds (one message carries 64 fds).
        packed, descs = transport.pack([t.detach() for _, t in named], 0)
        params = [{"name": n, "tensor": d} for (n, _), d in zip(named, descs, strict=True)]
        fds, buffers = [packed.fd], [packed]
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
