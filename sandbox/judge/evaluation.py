"""The judge's evaluation of one candidate: correctness, the reuse check, timing and memory.

Over 700 lines because the correctness checks of one candidate (the trials, the same tensors
refilled, drift and the reuse check, the other shape, the precision rule) share one class's state
with the sequence that runs them and the requests to the candidate's process. The judge v3
(issue 30) put the regions, the arena's reading and the memory measured from outside into that
class; the output reading (`rebuild`, `from_arena`) is now reading.py's, and the arena's size
and the memory checks are memory.py's, mixed in as the clock is (timed.py, roundchecks.py).

Runs in the judge (worker.py), which holds the reference, the float64 reference, the pristine
inputs, the tolerances and the roofline. The candidate runs in a process of its own
(process.py, behind the OS sandbox); this side writes its inputs into the judge's own region,
reads its outputs (on a GPU where it left them in the judge's arena), and decides. Any failure
raises a Verdict. The order: eager and torch.compile timed before the candidate's process
exists, trials with fresh seeds, the same tensors refilled and determinism, repeated calls whose
first ones are held (drift, reuse), the other shape, the judge's timed rounds whose every output
is checked, the roofline and memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from ..crossing import transport
from ..results import Correctness, EvalResult, KernelStats, Mismatch, Timings
from .memory import MemoryChecks
from .reading import OutputReading
from .remote import CandidateFailure
from .timed import TimedChecks, _interpreter_timings
from .verdict import (
    Verdict,
    _clone,
    _gib,
    _mismatch_text,
    _rule,
    _sizes_text,
    _Stopwatch,
    _task_dict,
    _tensors,
    _text,
    _to64,
)

# The most output bytes the reuse check holds at once, and about the most seconds it takes.
REUSE_BYTES = 4 << 30
REUSE_S = 2.0
_STATUSES_FROM_CANDIDATE = ("rejected", "compile_error", "runtime_error", "incorrect")


class Evaluation(OutputReading, MemoryChecks, TimedChecks):
    """The checks on one candidate, in order; any failure raises a Verdict."""

    def __init__(self, worker, ctx, config, request, serial: int):
        self.w, self.ctx, self.config, self.request = worker, ctx, config, request
        self.torch = worker.torch
        self.serial = serial
        self.proc: Any = None  # the candidate process (remote.py), once spawned
        self.trials: list[int] = []  # seeds of the trials at the task's shape
        self.seeds: list[int] = []
        self.max_abs = self.max_rel = 0.0
        # The precision rule's figures on the output and call nearest its limit: the candidate's
        # error vs float64, eager's worst error there (its yardstick) and the limit.
        self.err64: float = 0.0
        self.eager64: float | None = None
        # Per output and shape: eager's worst error vs float64 over the inputs checked so far.
        self.eager64_of: dict[tuple[str, tuple[int, ...]], float] = {}
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
        self.deadline = time.monotonic() + config.timeout_s
        self.arena: Any = None  # on a GPU: the candidate's device memory, the judge's (arena.py)
        self.main_region: Any = None  # (region, layout) of the task's shape
        self.variant_region: Any = None
        self.regions_bytes = 0
        self.fill_ms = 0.0  # the judge's input writes of one round, measured alone
        self.baseline_age_s: float | None = None  # eager's rounds kept from an earlier candidate
        self.wall_age_s: float | None = None  # the wall's share kept from an earlier candidate
        self.rounds_timed = 0  # the candidate's timed rounds (fewer than reps once settled)
        self.eager_ms: float | None = None  # eager per call, in the judge's own process
        self.wall_ms: float | None = None  # the reference per call through the wall
        self.wall_overhead_ms: float | None = None  # the share taken out of each call
        self.wall_around_ms: float | None = None  # the round less the reference's calls, a call
        self.raw_candidate: Any = None  # the candidate's rounds with nothing taken out
        self.share_dropped = False  # the share made the time impossible: reported without it
        self.wall_error = ""  # why the wall's cost could not be measured
        self.wall_spread = 0.0  # the wall's rounds: interquartile range over their median
        self.baseline_tries = 0  # eager's rounds measured this many times (impossible before)
        self.round_parts: tuple[float, ...] = ()  # medians: inputs, candidate's part, copy
        # Medians of the judge's work between the candidate's timed rounds, outside the clock
        # but inside the exclusive hold: the draws, describe, the checks, the release.
        self.between_parts: tuple[float, ...] = ()
        self.wall_parts: tuple[float, ...] = ()  # the same of the reference's rounds
        # What the candidate's process says of its rounds (reference rounds: True), a claim.
        self.inside_claims: dict[bool, list[tuple[float, ...]]] = {True: [], False: []}
        self.timed, self.calls = False, 1
        self.call_s = float("inf")  # the fastest checked call so far, seconds
        self.sampler: Any = None  # nvml.Sampler: the candidate's device memory past the arena
        self.context_bytes = 0  # the candidate process's CUDA context, before its code ran
        self.held_bytes = 0  # the most output bytes the judge asked the candidate to hold at once
        self.memory_parts = ""  # measure_memory's account, for the audit
        if worker.cuda:
            self.torch.cuda.reset_peak_memory_stats()
        # What this evaluation's exclusive holds met of the device (Worker.settle_device).
        self.busy_at_start = (worker.busy_s, worker.never_quiet)
        self.yields = 0  # times this judge let another judge's timed section in (yield_gate)
        self.yield_wait_s = 0.0  # and the seconds it waited for them

    # -- the sequence --------------------------------------------------------------------------

    def run(self, base: dict[str, Any]) -> EvalResult:
        waited = self.w.gate.waited_s
        try:
            return self._run({**base, "phases_s": self.phases})
        finally:  # inside the phases above: what of them went to waiting for other judges
            self.phases["gate_wait"] = self.w.gate.waited_s - waited

    def _run(self, base: dict[str, Any]) -> EvalResult:
        timed = self.config.timing and (self.w.cuda or self.config.host_clock_for_tests)
        self.timed = timed
        calls = 1
        baseline: dict[str, Any] = {}
        kept = self.kept_baseline() if timed else None
        with self.step("baseline"), self.gate("exclusive" if timed and kept is None else "shared"):
            if kept is not None:
                calls, self.fill_ms, baseline = kept
            elif timed:
                calls = self.plan_round()
            self.calls = calls
            # On CPU every held call's output has a slot of its own; on a GPU outputs stay in
            # the arena and the held calls share input set 0.
            held = 1 if self.w.cuda else self.reuse_calls()
            self.open_region("main", self.ctx.main, max(calls, held))
            if timed and kept is None:  # before the candidate's process: nothing of it beside
                self.calibrate(calls)
                baseline = self.measured_baseline(calls)
                self.keep_baseline(calls, baseline)
            if timed:
                self.eager_ms = baseline["eager"].median_ms
        with self.step("load"):
            self.start()
        if timed and not self.kept_wall():
            # Before the candidate's code: what a round's wall costs.
            with self.step("wall"), self.gate("exclusive"):
                self.calibrate_wall(calls)
        with self.step("load"):
            self.watch_memory()
            self.build("main", self.ctx.main)
        # Between the checks (the judge's own references and comparisons run outside any
        # request), a judge waiting to time is let in too.
        for name, check in (
            ("trials", self.check_trials),
            ("same_address", self.check_same_address),
            ("drift", self.check_reuse),  # repeated calls, the first ones held: drift and reuse
            ("variant", self.check_variant),
        ):
            self.yield_gate()
            with self.step(name):
                check()
        notes = self.notes()
        if not timed:
            self.check_memory()
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
        with self.step("timing"), self.gate("exclusive"):
            candidate = self.candidate_rounds(calls)
        self.snap_buf = None  # the round's snapshot: its room goes back to the judge's checks
        with self.step("drift"):
            self.check_drift(calls=1, after="after timing")
        self.check_memory()
        timings = Timings(
            meaningful=self.w.cuda and not self.config.host_clock_for_tests,
            note=self.timing_note(calls),
            candidate=candidate,
            eager=baseline.get("eager"),
            compiled=baseline.get("compiled"),
            compiled_error=self.ctx.compiled_error,
            judge_ms_per_call=candidate.median_ms,
        )
        if self.timed_edge_cases:
            notes.append(
                f"{self.timed_edge_cases} timed output(s) differed from eager's beyond the "
                "allclose tolerance at some element but were as accurate as eager against a "
                "float64 reference (an ill-conditioned output: both are rounding differently)"
            )
        if self.config.cuda_graphs:
            notes.append(
                "CUDA graphs were asked for, but the judge times every contender by its own "
                "clock across processes, without capturing graphs"
            )
        self.stats = self.kernel_stats()
        notes += [n for n in self.interpreter_notes if n not in notes]
        return self.timed_result(base, timings, notes)

    # -- the GPU's gate (gpugate.py) -------------------------------------------------------------

    @contextlib.contextmanager
    def gate(self, mode: str):
        """The GPU's gate in `mode` for a block, the candidate's process stopped whenever this
        judge does not hold it; the time spent waiting for it is added to the candidate's
        deadline (the wait is not the candidate's)."""

        def waited() -> float:  # the block's own waits: yield_gate moves the deadline itself
            return self.w.gate.waited_s - self.yield_wait_s

        before = waited()
        with self.w.held(mode, before_release=self.freeze, after_acquire=self.thaw):
            self.deadline += waited() - before
            before = waited()
            yield
        self.deadline += waited() - before  # the shared hold taken back after it

    def yield_gate(self) -> float:
        """Held shared (checking, the candidate's compile and calls): when another judge waits
        to time, stop the candidate's process, let that judge in, and go on once it is done;
        the seconds waited, which move this candidate's deadline (the wait is not its). Inside
        an exclusive block, or with nobody waiting, nothing happens."""
        if self.w.gate.held != "shared":
            return 0.0
        waited = self.w.yield_gate(before_release=self.freeze, after_acquire=self.thaw)
        if waited > 0.0:
            self.deadline += waited
            self.yield_wait_s += waited
            self.yields += 1
        return waited

    def freeze(self, stop: bool = True) -> None:
        """Stop (or continue) the candidate's process and everything it started, and this
        judge's NVML sampler with it: its driver calls (2000 a second) would otherwise run
        beside the timed rounds of the judge that holds the gate now. A stopped process
        allocates nothing, so no peak is missed."""
        from ..crossing.isolation import descendants
        from .gpugate import freeze

        self.sampler_pause(stop)
        proc = self.proc
        if proc is None or proc.ended is not None or not proc.host:
            return
        host = proc.host
        freeze(lambda: [host, *descendants(host)], stop)

    def thaw(self) -> None:
        self.freeze(stop=False)

    def timing_note(self, calls: int) -> str:
        cal = f"input writes {self.fill_ms:.4f} ms a round"
        if self.wall_overhead_ms is not None:
            cal += (
                f"; the wall's share {self.wall_overhead_ms:.4f} ms a call: the task's own Model "
                "timed the same way in "
                + (
                    "the candidate's process"
                    if self.wall_age_s is None
                    else f"an earlier candidate's process of this task ({self.wall_age_s:.0f} s "
                    "before)"
                )
                + " before its code was imported, "
                f"{self.wall_ms:.4f} ms a call (the lower quartile of its rounds"
                + (f", {self.wall_spread:.1%} apart" if self.wall_age_s is None else "")
                + f"), against eager's {self.eager_ms:.4f} ms in the "
                "judge's"
                + (
                    f", the round less that process's own account of its calls "
                    f"{self.wall_around_ms:.4f} ms a call (the smaller is taken out)"
                    if self.wall_around_ms is not None
                    else ""
                )
                + (" (not taken out after all: see the notes)" if self.share_dropped else "")
            )
        else:
            cal += (
                "; the wall's share could not be measured"
                + (f" ({self.wall_error})" if self.wall_error else "")
                + ": the candidate's times include it (never faster than its truth)"
            )
        for what, parts, claims in (
            ("the reference's", self.wall_parts, self.inside_claims[True]),
            ("the candidate's", self.round_parts, self.inside_claims[False]),
        ):
            if parts:
                fill, cand, copy = parts
                cal += (
                    f"; {what} rounds, median parts: inputs {fill:.4f} ms, its process "
                    f"{cand:.4f} ms, output copy {copy:.4f} ms"
                )
            if claims:
                launch = statistics.median(c[0] for c in claims)
                wait = statistics.median(c[1] for c in claims)
                cal += f" (its process says: launching {launch:.4f} ms, waiting {wait:.4f} ms)"
        if self.between_parts:
            draw, describe, checks, release = self.between_parts
            cal += (
                f"; between the candidate's rounds, median: draws {draw:.4f} ms, describe "
                f"{describe:.4f} ms, checks {checks:.4f} ms, release {release:.4f} ms"
            )
        kept = (
            f" (for an earlier candidate of this task, {self.baseline_age_s:.0f} s before)"
            if self.baseline_age_s is not None
            else ""
        )
        busy_s = self.w.busy_s - self.busy_at_start[0]
        never = self.w.never_quiet - self.busy_at_start[1]
        if never:
            cal += (
                f"; the device still ran another process's work when {never} timed section(s) "
                "began: it can only have made the rounds timed beside it slower"
            )
        elif busy_s >= 0.01:
            cal += f"; the timed sections waited {busy_s:.2f} s for another process's work to end"
        if self.baseline_tries > 1:
            kept += (
                f" (measured {self.baseline_tries} times: the earlier rounds were under the "
                "physical bound)"
            )
        return (
            f"the judge's clock: median of {self.rounds_timed or self.timed_reps()} rounds of "
            f"{calls} call(s), fresh "
            "inputs written by the judge inside its clock, each call's output copied out by the "
            f"judge inside it; eager and torch.compile timed before the candidate's process "
            f"existed, from their inputs written{kept}; the judge's own part taken out ({cal}); "
            f"L2 flushed before each round: {self.config.l2_flush}"
        )

    def notes(self) -> list[str]:
        notes = list(self.ctx.notes)
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
        if self.w.cuda and self.w.allocator is not None:
            from ..crossing.arena import Arena

            try:
                self.arena = Arena(self.arena_bytes())
            except RuntimeError as e:
                raise Verdict(
                    "crashed", f"internal evaluator error: {e}", rule="worker-start"
                ) from e
        try:
            self.proc = sandbox.spawn(
                source=self.request["source"], dtype=dtype, config=self.config, arena=self.arena
            )
        except RuntimeError as e:
            raise Verdict("crashed", f"internal evaluator error: {e}", rule="worker-start") from e

    def open_region(self, name: str, shape, sets: int) -> None:
        """The judge's region of one shape: `sets` input sets and output slots (regions.py)."""
        from ..crossing.regions import Layout, create_region
        from ..task import build_inputs

        template = build_inputs(
            shape.ns, self.ctx.dtype, self.w.device, self.w.rng.randrange(2**31)
        )
        layout = Layout.plan(template, shape.out_meta, sets, slots=not self.w.cuda)
        try:
            try:
                region = create_region(layout.nbytes, self.w.cuda)
            except RuntimeError:
                if not self.w.cuda:
                    raise
                # The driver's memory, not torch's: blocks the judge's checks left cached in
                # torch's allocator go back first (measured on the H200: the variant region of
                # Swish, Frobenius norm and InstanceNorm at full size found none otherwise).
                self.torch.cuda.empty_cache()
                region = create_region(layout.nbytes, self.w.cuda)
        except (OSError, RuntimeError) as e:
            raise Verdict(
                "crashed",
                f"internal evaluator error: no region for the inputs ({e})",
                rule="evaluator",
            ) from e
        self.regions_bytes += layout.nbytes
        if name == "main":
            self.main_region = (region, layout)
        else:
            self.variant_region = (region, layout)

    def region_of(self, name: str):
        return self.main_region if name == "main" else self.variant_region

    def reuse_calls(self) -> int:
        """Calls whose outputs are all held at once by the reuse check (issue 29): up to
        config.reuse_calls, fewer where they would take more than REUSE_BYTES, a quarter of the
        arena on a GPU, or more than REUSE_S of calls beyond the drift check's own, as slow as
        the trials' fastest (the interpreter);
        never fewer than 3 where they fit (a ring of two), 2 where not."""
        per = max(self.ctx.main.output_bytes, 1)
        room = REUSE_BYTES if self.arena is None else min(REUSE_BYTES, self.arena.nbytes // 4)
        n = min(self.config.reuse_calls, room // per)
        if self.call_s != float("inf"):  # slow calls (the interpreter): REUSE_S more at most
            extra = int(REUSE_S / max(self.call_s, 1e-6))
            n = min(n, self.config.drift_calls + extra)
        return max(3 if room // per >= 3 else 2, n)

    def output_limit(self) -> int:
        return 4 * max(self.ctx.main.footprint, 1 << 20) + (1 << 30)

    def req(
        self, message: dict[str, Any], fds: Sequence[int] = (), expect: tuple[str, ...] = ()
    ) -> transport.Received:
        """One request to the candidate process; its failures and refusals become Verdicts.

        expect: the keys the reply to this request carries; a message without them was not
        written by the evaluator's code in the candidate process (a forgery on its socket).
        """
        try:
            got = self.proc.request(message, fds, deadline=self.deadline, idle=self.yield_gate)
        except CandidateFailure as f:
            if f.rule == "memory" and self.arena is not None and self.arena_short():
                raise Verdict(
                    "crashed",
                    "internal evaluator error: the device had room for an arena of only "
                    f"{_gib(self.arena.nbytes)} beside the judge, under the candidate's limit of "
                    f"{_gib(self.limit_bytes())}; the candidate needed more than the arena, "
                    f"not more than its limit.\n{f.message}",
                    rule="evaluator",
                    recycle=True,
                ) from None
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

    def build(self, name: str, shape, reference: bool = False) -> None:
        """ModelNew (reference: the task's own Model, the wall's calibration) at one shape in
        the candidate's process, holding the reference's parameters; then the shape's region."""
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
                    **({"reference": True} if reference else {}),
                },
                fds,
                expect=("ok",),
            )
            got.close()
        finally:
            for b in buffers:
                b.close()
        region, layout = self.region_of(name)
        self.req(
            {"op": "regions", "shape": name, "layout": layout.to_json()},
            [region.fd],
            expect=("ok",),
        ).close()

    def call(self, name: str, inputs: list[Any], what: str, *, k: int = 0, hold: bool = False):
        """One checked call on input set k of the shape's region: (outputs as judge tensors, the
        inputs as forward left them, read from the judge's own region)."""
        from ..crossing.regions import fill

        torch = self.torch
        region, layout = self.region_of(name)
        fill(region.flat, layout.inputs[k], inputs)
        self.sync()
        values = [x if not isinstance(x, torch.Tensor) else None for x in inputs]
        got = self.req(
            {"op": "call", "shape": name, "set": k, "values": values, "what": what, "hold": hold},
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
            out = self.rebuild(m.get("output"), got.fds, name, what)
        finally:
            got.close()
        self.note_memory()
        views = [s.view(region.flat) if s is not None else None for s in layout.inputs[k]]
        after = [v.clone() if v is not None else x for v, x in zip(views, inputs)]
        return out, after

    # -- correctness ---------------------------------------------------------------------------

    def fresh(self, shape) -> tuple[int, list[Any]]:
        from ..task import build_inputs

        seed = self.w.rng.randrange(2**31)
        self.seeds.append(seed)
        return seed, build_inputs(shape.ns, self.ctx.dtype, self.w.device, seed)

    def regenerate(self, shape, seed: int) -> list[Any]:
        from ..task import build_inputs

        return build_inputs(shape.ns, self.ctx.dtype, self.w.device, seed)

    def reference(self, shape, pristine: list[Any]) -> tuple[Any, Any]:
        """Eager's output and the float64 reference's; the latter on the host when the device
        has no room for it."""
        torch = self.torch
        with torch.no_grad():
            ref = shape.ref(*_clone(pristine, torch))
            if shape._ref64_host is None:
                for _ in range(2):  # again once the judge's cached blocks went back
                    try:
                        return ref, shape.ref64(*_to64(pristine, torch))
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
            if not self.host_has_room_for_ref64(shape):
                # Neither on the device nor within the judge's own host limit (a 6.4 GB input on
                # an 80 GB GPU: 26 GB in float64, over the worker's 16 GB): outputs are judged
                # against eager's within the tolerance, as KernelBench judges them; the
                # precision rule, which needs the float64 answer, is not applied.
                self.precision_where = (
                    "no float64 reference: in float64 this task fits neither on the device "
                    "beside the candidate's arena nor within the judge's host memory limit "
                    f"({self.config.host_memory_gb:g} GB); outputs were judged against eager's "
                    "within the tolerance, without the precision rule"
                )
                return ref, None
            host = shape.ref64_on_host()
            on_host = [x.cpu() if isinstance(x, torch.Tensor) else x for x in pristine]
            self.precision_where = (
                "float64 reference computed on the host: it did not fit on the device"
            )
            return ref, host(*_to64(on_host, torch))

    def host_has_room_for_ref64(self, shape) -> bool:
        """The float64 reference's run fits on the host beside what the judge holds there: its
        inputs in float64 and twice the fp32 run's peak (every tensor of it twice as wide), with
        a quarter of the judge's host limit kept free."""
        from ..crossing.isolation import rss_bytes

        held = rss_bytes(os.getpid()) or 0
        peak = shape.ref_peak or shape.footprint
        need = 2 * peak + 2 * shape.input_bytes + 2 * shape.param_bytes
        return held + need <= 0.75 * self.config.host_memory_gb * 2**30

    def checked_call(
        self, shape, name, args, what, *, hint="", rule=None, refs=None, k=0, hold=False
    ):
        """Call the candidate, then check its inputs and its output against the reference. The
        reference runs after the candidate, so no freed block can hold the right answer.

        `args` stay the pristine copy: the candidate gets their bytes in shared memory, never
        these tensors. What forward left in its inputs is compared with them and let go before
        the reference runs (one trial's tensors alive at a time: the judge's working set).
        """
        out, after = self.call(name, args, what, k=k, hold=hold)
        self.check_inputs(after, args, what)
        del after
        ref, ref64 = refs if refs is not None else self.reference(shape, args)
        self.check_output(out, ref, ref64, f"{what}{hint}", rule=rule, call=(shape, args))
        return out

    def nearby(self, shape, pristine: list[Any]):
        """Eager's errors on inputs a few ulps from `pristine`, drawn as the precision rule asks
        (nearby.py); a draw with no float64 reference, or no room on the device, ends them."""
        from .nearby import Nearby, eager_errors, nudged

        torch = self.torch

        def draw(k: int) -> dict[str, float] | None:
            try:
                ref, ref64 = self.reference(shape, nudged(pristine, torch, k))
            except torch.cuda.OutOfMemoryError:  # beside the arena: the call's own eager decides
                return None
            return None if ref64 is None else eager_errors(ref, ref64, torch)

        return Nearby(draw, self.deadline)

    def check_trials(self) -> None:
        shape = self.ctx.main
        self.shapes_checked.append(shape.sizes)
        for t in range(self.config.trials):
            seed, inputs = self.fresh(shape)
            started = time.monotonic()
            self.checked_call(shape, "main", inputs, f"trial {t + 1}")
            self.call_s = min(self.call_s, time.monotonic() - started)
            self.trials.append(seed)

    def check_same_address(self) -> None:
        """New values in the same tensors (every call on a set gets the same tensor objects, at
        the same addresses, in the candidate process): a cache keyed on them fails; then the
        same values again, for determinism."""
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

    def check_reuse(self) -> None:
        """Repeated calls (stateful drift) and output reuse, whatever the ring's length up to
        the calls held: max(drift_calls, K) calls, the first K on K input sets (the trials'
        inputs again, then fresh ones), each output held by the candidate's process as a caller
        would hold it and copied by the judge when returned; then every held output is read
        again. One that changed was written after it was returned (a ring of persistent buffers
        handed out in turn). On a GPU the judge also sees storage identity itself: two held
        outputs sharing arena bytes. The calls past K repeat the trials' inputs, unheld."""

        from ..crossing.regions import fingerprint

        shape = self.ctx.main
        n = self.reuse_calls()
        salt = self.w.rng.randrange(1, 2**31)
        seen: list[Any] = []
        places: list[tuple[int, int, int]] = []
        for k in range(max(n, self.config.drift_calls)):
            held = k < n
            if k < len(self.trials) or not held:
                inputs = self.regenerate(shape, self.trials[k % len(self.trials)])
            else:
                _, inputs = self.fresh(shape)
            what = f"repeated call {k + 1}" + (f" (held, {k + 1} of {n})" if held else "")
            slot = 0 if self.w.cuda or not held else k
            out = self.checked_call(
                shape,
                "main",
                inputs,
                what,
                hint=" (right before, wrong now: state kept across calls?)",
                rule="drift",
                k=slot,
                hold=held,
            )
            if held:
                seen.append([fingerprint(t, salt) for t in _tensors(out, self.torch)])
            del out
        # The calls past the n held ones ran beside all n: n outputs past their own.
        beside = n + 1 if self.config.drift_calls > n else n
        self.held_bytes = max(self.held_bytes, beside * shape.output_bytes)
        got = self.req({"op": "refetch", "shape": "main"}, expect=("outputs",))
        try:
            outs = got.message.get("outputs")
            if not (isinstance(outs, list) and len(outs) == n):
                raise Verdict("rejected", "the held outputs were not described", rule="protocol")
            for k, node in enumerate(outs):
                again = self.rebuild(node, got.fds, "main", f"held call {k + 1}")
                if self.arena is not None:
                    places.extend((k, *p) for p in _arena_places(node))
                now = [fingerprint(t, salt) for t in _tensors(again, self.torch)]
                del again
                if now != seen[k]:
                    raise Verdict(
                        "rejected",
                        f"the output of held call {k + 1} of {n} changed after it was returned: "
                        "the candidate writes into memory it already handed out (a ring of "
                        "persistent output buffers?). Allocate a new output per call.",
                        rule="reuse",
                    )
        finally:
            got.close()
        for (k1, a0, a1), (k2, b0, b1) in _pairs(places):
            if k1 != k2 and a0 < b1 and b0 < a1:
                raise Verdict(
                    "rejected",
                    f"held calls {k1 + 1} and {k2 + 1} returned outputs that share device memory: "
                    "the candidate hands out the same buffer again while the first is held. "
                    "Allocate a new output per call.",
                    rule="reuse",
                )
        self.req({"op": "release"}, expect=("released",)).close()

    def check_variant(self) -> None:
        shape = self.ctx.variant
        if shape is None:
            return
        sizes = _sizes_text(shape.sizes)
        try:
            self.open_region("variant", shape, 1)
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

    def check_output(
        self, out, ref, ref64, what: str, rule: str | None = None, call: tuple | None = None
    ) -> None:
        """`out` against eager's `ref` (the tolerance, compare.py) and the float64 `ref64` (the
        precision rule); `call`: the (shape, pristine inputs) of the call, for eager's error on
        inputs a few ulps away when an output is past the limit (nearby.py)."""
        from .compare import (
            PRECISION_FACTOR,
            compare,
            error_stats,
            flatten_outputs,
            has_bad_values,
            precision_limit,
            rel_error,
        )

        torch = self.torch
        named_out = dict(flatten_outputs(out))
        named_ref64 = dict(flatten_outputs(ref64)) if ref64 is not None else {}
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
        if ref64 is None:  # no float64 reference (reference(): it fits nowhere)
            return
        nearby = None

        def limit_of(eager_err: float) -> float:
            return precision_limit(eager_err, self.ctx.dtype, self.config.precision)

        for (name, o), (_, r), (_, r64) in zip(
            flatten_outputs(out), flatten_outputs(ref), flatten_outputs(ref64)
        ):
            if not isinstance(r, torch.Tensor) or not r.dtype.is_floating_point:
                continue
            err, eager = rel_error(o, r64), rel_error(r, r64)
            # Eager's error on one draw is itself a draw: over a few elements (a per-row loss
            # of 6 rows, most of them 0) it fell to 4.0e-7 where an honest kernel's was 1.6e-6,
            # 4.03x. The limit reads eager's worst error on this output over every input checked
            # so far (at this shape): how accurate fp32 PyTorch is here, not on one lucky draw.
            key = (name, tuple(r.shape))
            worst = max(self.eager64_of.get(key, 0.0), eager)
            if err > limit_of(worst) and call is not None:
                # Few elements that cancel: eager's error on this draw may be a lucky rounding.
                # Its worst on inputs a few ulps away (the same conditioning) decides (nearby.py).
                nearby = nearby or self.nearby(*call)
                worst = max(worst, nearby.worst(name, err / PRECISION_FACTOR))
            self.eager64_of[key] = worst
            limit = limit_of(worst)
            if self.limit64 is None or err / limit >= self.err64 / self.limit64:
                # The three figures of the result are one output's, the nearest its limit: a
                # worst error beside another output's limit reads as a failure that passed.
                self.err64, self.eager64, self.limit64 = err, worst, limit
            if err > limit:
                raise Verdict(
                    "incorrect",
                    f"{what}: {name} is less accurate than PyTorch: relative error vs a float64 "
                    f"reference {err:.2e}, eager PyTorch's {eager:.2e} (its worst on this "
                    f"output so far{_nearby_text(nearby)} {worst:.2e}), allowed {limit:.2e} "
                    f"(policy {self.config.precision}). This is what TF32 or fp16/bf16 "
                    "accumulation looks like: keep fp32 operands and accumulators "
                    '(tl.dot(..., input_precision="ieee") for fp32), or run with '
                    "--precision tf32-ok if TF32 is acceptable.",
                    rule="precision",
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
            err_vs_fp64=self.err64 if self.limit64 is not None else None,
            eager_err_vs_fp64=self.eager64,
            precision_limit=self.limit64,
            deterministic=self.deterministic,
            degenerate_task=self.ctx.degenerate,
            mismatch=self.mismatch,
        )

    def cleanup(self) -> None:
        if self.sampler is not None:
            self.sampler.__exit__(None, None, None)
            self.sampler = None
        if self.proc is not None:
            self.proc.close()
            self.proc = None
        # The candidate's process is gone (reaped): nothing maps these any more.
        for held in (self.main_region, self.variant_region):
            if held is not None:
                held[0].close()
        self.main_region = self.variant_region = None
        if self.arena is not None:
            self.arena.close()
            self.arena = None
        self.snap_buf = None
        if self.w.cuda:
            with contextlib.suppress(Exception):
                self.torch.cuda.empty_cache()


def _arena_places(node: Any) -> list[tuple[int, int]]:
    """[start, end) of every arena leaf of a described output."""
    if not isinstance(node, dict):
        return []
    out: list[tuple[int, int]] = []
    for key in ("tuple", "list"):
        for v in node.get(key) or []:
            out += _arena_places(v)
    for pair in node.get("dict") or []:
        if isinstance(pair, list) and len(pair) == 2:
            out += _arena_places(pair[1])
    d = node.get("arena")
    if (
        isinstance(d, dict)
        and isinstance(d.get("offset"), int)
        and isinstance(d.get("nbytes"), int)
        and d["nbytes"] > 0
    ):
        out.append((d["offset"], d["offset"] + d["nbytes"]))
    return out


def _pairs(items: list) -> list:
    ordered = sorted(items, key=lambda p: p[1])
    pairs = []
    for i, a in enumerate(ordered):  # sorted by start: only neighbours that begin before a ends
        for b in ordered[i + 1 :]:
            if b[1] >= a[2]:
                break
            pairs.append((a, b))
    return pairs


def _nearby_text(nearby: Any) -> str:
    """What eager's worst error was taken over, for the precision message."""
    if nearby is None or not nearby.draws:
        return ""
    n = len(nearby.draws)
    return f", with {n} input{'s' if n > 1 else ''} a few ulps from these,"
