"""The judge's clock: every time in a result is measured here, the same way for every contender.

A part of Evaluation (evaluation.py), which mixes it in. A timed round is n calls back to back,
call k on input set k of the judge's region (regions.py). The judge's host clock starts before
it writes the round's inputs (fresh values, drawn here) and stops when it holds its own copy of
every output:

- eager and torch.compile: write the inputs, synchronize, clock, n calls in this process,
  synchronize, clock (the judge's own code: nothing to keep the inputs from). They are timed
  before the candidate's process exists, so nothing of the candidate's runs on the GPU beside
  them (a candidate that keeps a kernel running while eager is timed would make eager slower);
  a time under the physical bound is measured again, then an evaluator error.
- the candidate: clock, write the inputs, "round" to its process, n calls there, its reply
  naming where each output lies in the arena (the judge's memory the candidate allocates
  from, arena.py), the judge's copy of those bytes, clock. Its process learns the inputs only
  after the clock started, and the judge reads the outputs itself: work done before the clock
  had nothing to work on, work left for after it is missing from the copy (a wrong output).

From the candidate's rounds the judge takes out what it did itself: writing the inputs
(measured alone, before the candidate's process existed) and the wall's share of a round.
That share (the switches between the judge's CUDA context and the candidate's, the channel, the
judge's copy of the outputs: 0.3-1 ms a round on the H200, growing with the outputs) is measured
on the task's own Model: built in the candidate's process before its code is imported, timed
in rounds exactly as the candidate will be; its time per call less eager's in the judge's
process (the lower quartile of its rounds: other work on the machine only makes rounds slower,
and a share too large would make the candidate faster than its truth) is what each of the
candidate's calls is relieved of. Judges of one GPU hold its gate from their start (gpugate.py),
so no judge's calibration runs beside another's start. The candidate's code cannot touch
that measurement (it ran before the import) and can make its rounds slower; what it can gain is
its end of the channel the evaluator's code serves (measured on the H200: 15 us blocking, 11 us
spinning), spread over a round of ROUND_MS or more.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import TYPE_CHECKING, Any

from ..results import EvalResult, Timings
from .estimates import impossible_baseline, lower_quartile, spread, wall_share
from .roundchecks import RoundChecks
from .verdict import Verdict

# A timed round runs at least this long (n calls of eager's time), so the round trip's share of
# a call, and what a candidate could save of it, stays small.
ROUND_MS = 2.0
# The most calls (input sets) per round, and the most bytes one round's sets may take. More
# calls do not shrink the wall's share of a small call: measured on the H100 (2026-12-06, a
# 256x4096 elementwise kernel), the share is ~20 us a call at 64 and at 196 calls alike (the
# views of each call's inputs, each output's copy), while 196-call rounds made the candidate's
# timed section 2.2 s and the harness 23 candidates a minute with 4 judges.
MAX_CALLS = 64
ROUND_BYTES = 2 << 30
# Eager's time per call, for planning a round: this many calls back to back (one call with its
# synchronize measures the synchronize, 10-20 us, not a call).
PLAN_CALLS = 8
# Calibration repetitions of the judge's own work (median taken).
CALIBRATION_REPS = 15
# The wall's calibration (the reference's rounds in the candidate's process): a near-constant
# share of a round, so fewer rounds than the candidate's give its median.
WALL_WARMUP = 3
WALL_REPS = 20
# Eager's and torch.compile's rounds serve the next candidates of the same task and config for
# this long: they were timed with no candidate process alive, and nothing of a candidate
# outlives its verdict, so they are as true for the next one; past it they are timed again
# (the device's clocks drift over minutes).
BASELINE_TTL_S = 120.0
# The candidate's rounds stop early once their median is settled: at least SETTLED_MIN rounds
# whose interquartile range is within SETTLED_SPREAD of their median (the median's standard
# error is then ~0.5%, inside the 2% two evaluations of one kernel must agree within; at 1% a
# small kernel's rounds, a few percent apart, never settled and ran all 50). Only
# the judge's own samples decide; a candidate can make its rounds noisy, which costs it the full
# `reps` rounds, never a faster time. Eager's and torch.compile's rounds always run all `reps`.
SETTLED_MIN = 15
SETTLED_SPREAD = 0.02
# The wall's share is handed on to the next candidates only when its rounds' interquartile range
# is within this much of their median (a quiet machine: 1-3% on the H100); otherwise the next
# candidate measures it again.
WALL_KEEP_SPREAD = 0.05
# Eager's or torch.compile's time under the physical bound is the evaluator's failure (the
# machine's other work during its rounds, a bad calibration): measured again this many times
# before the candidate's process starts, then an evaluator error, never a reported time.
BASELINE_TRIES = 3
# Timed rounds are fewer for tasks whose outputs are so large that checking each costs seconds.
TIMED_OUTPUT_BYTES = 64 << 30
MIN_TIMED_REPS = 10


class TimedChecks(RoundChecks):
    """Evaluation's timing: baseline rounds, the candidate's rounds, the result."""

    if TYPE_CHECKING:  # the attributes and methods of Evaluation, which this is a part of
        timed_edge_cases: int
        eager_ms: float | None
        wall_ms: float | None
        wall_overhead_ms: float | None
        wall_around_ms: float | None
        held_bytes: int
        raw_candidate: Any

        def __getattr__(self, name: str) -> Any: ...

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
        rf = roofline(bytes_, flops, self.config.dtype, self.ctx.ceilings, self.config.precision)
        raw = self.raw_candidate
        if (
            is_impossible(cand, rf.bound_ms)
            and self.wall_overhead_ms
            and raw is not None
            and not is_impossible(raw.median_ms, rf.bound_ms)
        ):
            # The time is impossible only once the wall's share is taken out: the share is the
            # evaluator's estimate, so the fault is the evaluator's, not the candidate's. The
            # rounds' time with nothing taken out is reported (the work plus the wall: never
            # faster than the truth), and the share is measured afresh for the next candidate.
            notes = [
                *notes,
                f"the judge's clock less the wall's share ({self.wall_overhead_ms:.4f} ms a "
                f"call) measured {cand:.4f} ms, under the physical bound {rf.bound_ms:.4f} ms: "
                "the share was over-estimated, so the time reported is the rounds' own, with "
                f"nothing taken out ({raw.median_ms:.4f} ms a call; slower than the truth)",
            ]
            self.share_dropped = True
            self.ctx.wall = None
            timings = dataclasses.replace(
                timings,
                candidate=raw,
                judge_ms_per_call=raw.median_ms,
                note=self.timing_note(self.calls),
            )
            cand = raw.median_ms
        rf = dataclasses.replace(rf, fraction=rf.policy_ms / cand if cand > 0 else None)
        if is_impossible(cand, rf.bound_ms):
            raise Verdict(
                "rejected",
                f"the judge's clock measured {cand:.4f} ms per call, under the physical lower "
                f"bound {rf.bound_ms:.4f} ms ({bytes_ / 1e9:.3f} GB moved at "
                f"{rf.bandwidth_gbps:.0f} GB/s, {flops / 1e9:.2f} GFLOP at {rf.peak_tflops:.0f} "
                "TFLOP/s): the measured time cannot be the real work",
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

    # -- the rounds ----------------------------------------------------------------------------

    def host_clock(self) -> bool:
        return bool(self.config.host_clock_for_tests or not self.w.cuda)

    def sync(self) -> None:
        if self.w.cuda:
            self.torch.cuda.synchronize()

    def plan_round(self) -> int:
        """Calls per round: ROUND_MS of eager's time, within MAX_CALLS and ROUND_BYTES."""
        from ..task import build_inputs

        ctx, torch = self.ctx, self.torch
        args = build_inputs(ctx.main.ns, ctx.dtype, self.w.device, self.w.rng.randrange(2**31))
        with torch.no_grad():
            ctx.main.ref(*args)  # warm
            self.sync()
            started = time.perf_counter()
            ctx.main.ref(*args)
            self.sync()
            one_ms = (time.perf_counter() - started) * 1000.0
            if self.w.cuda and one_ms * PLAN_CALLS < ROUND_MS:  # a small call: time a burst
                started = time.perf_counter()
                for _ in range(PLAN_CALLS):
                    ctx.main.ref(*args)
                self.sync()
                one_ms = (time.perf_counter() - started) * 1000.0 / PLAN_CALLS
        return plan_calls(
            max(one_ms, 1e-3),
            ctx.main.input_bytes + ctx.main.output_bytes,
            MAX_CALLS if self.w.cuda else 4,  # the interpreter: milliseconds per call
        )

    def draw_sets(self, n: int) -> list[list[Any]]:
        """A round's n input sets, fresh values (the judge's seed: no candidate has seen them)."""
        from ..task.build import build_input_sets

        ctx = self.ctx
        seed = self.w.rng.randrange(2**31)
        return build_input_sets(ctx.main.ns, ctx.dtype, self.w.device, seed, n)

    def fill_sets(self, sets: list[list[Any]]) -> None:
        from ..crossing.regions import fill

        region, layout = self.main_region
        for k, values in enumerate(sets):
            fill(region.flat, layout.inputs[k], values)

    def kept_baseline(self) -> tuple[int, float, dict[str, Any]] | None:
        """(calls, input-write ms, eager's and torch.compile's samples) of an earlier candidate
        of this task and config, timed less than BASELINE_TTL_S ago; None if there is none."""
        kept = self.ctx.baseline
        if kept is None:
            return None
        key, when, calls, fill_ms, samples = kept
        age = time.monotonic() - when
        if key != self.baseline_key() or age > BASELINE_TTL_S:
            return None
        self.baseline_age_s = age
        return calls, fill_ms, samples

    def keep_baseline(self, calls: int, samples: dict[str, Any]) -> None:
        self.ctx.baseline = (self.baseline_key(), time.monotonic(), calls, self.fill_ms, samples)
        self.ctx.wall = None  # measured again beside the new baseline

    def kept_wall(self) -> bool:
        """Take the wall's share from an earlier candidate of this task and config, measured
        with the baseline kept now (so within its BASELINE_TTL_S); False if there is none.

        The share is the evaluator's: the same zygote forks every candidate's process, the
        same code serves its end of the channel, the same judge copies the outputs; it was
        measured on the reference before that earlier candidate's code was imported, so no
        candidate's code has touched it. Re-measuring it costs ~25 rounds of the reference (0.7
        s a candidate on small tasks) and returns the same figure within the rounds' noise."""
        kept = self.ctx.wall
        if kept is None or self.eager_ms is None:
            return False
        key, when, wall_ms, parts, claims, around_ms = kept
        if key != self.baseline_key() or time.monotonic() - when > BASELINE_TTL_S:
            return False
        self.wall_ms, self.wall_parts, self.wall_around_ms = wall_ms, parts, around_ms
        self.inside_claims[True] = list(claims)
        self.wall_overhead_ms = wall_share(wall_ms, self.eager_ms, around_ms)
        self.wall_age_s = time.monotonic() - when
        return True

    def baseline_key(self) -> str:
        import json

        return json.dumps(self.config.to_dict(), sort_keys=True, default=str)

    def calibrate(self, n: int) -> None:
        """The judge's own parts of a round, measured alone (no candidate process alive)."""
        sets = self.draw_sets(n)
        fills = []
        for _ in range(CALIBRATION_REPS):
            self.sync()
            started = time.perf_counter()
            self.fill_sets(sets)
            self.sync()
            fills.append((time.perf_counter() - started) * 1000.0)
        self.fill_ms = statistics.median(fills)

    def calibrate_wall(self, n: int) -> None:
        """What the wall costs a round, measured on the task's own Model before the candidate's
        code is imported: the reference, built in the candidate's process with the judge's
        parameters, timed in rounds exactly as the candidate will be (inputs written, "round",
        its outputs copied out by the judge). Its time per call less eager's in the judge's own
        process is the wall's share (the context switches, the channel, the judge's copy), which
        the judge takes out of each of the candidate's rounds. On failure nothing is taken out
        (the candidate's times are then its true time plus the wall's: never faster)."""
        self.wall_ms = self.wall_overhead_ms = self.wall_around_ms = None
        try:
            self.build("main", self.ctx.main, reference=True)
            walls: list[float] = []
            around: list[float] = []  # per call: the round less the process's own n calls
            parts: list[tuple[float, float, float]] = []
            warmup = min(self.config.warmup, WALL_WARMUP)
            claims = self.inside_claims[True]
            for r in range(warmup + min(self.timed_reps(), WALL_REPS)):
                sets = self.draw_sets(n)
                before = len(claims)
                wall, part, _ = self.wall_round(n, sets, reference=True)
                self.req({"op": "release"}, expect=("released",)).close()
                if r >= warmup:
                    walls.append(wall / n)
                    parts.append(part)
                    if len(claims) > before:
                        around.append(max(0.0, wall - sum(claims[-1])) / n)
        except Verdict as v:  # before any candidate code: the evaluator's side failed
            lines = str(v.message).strip().splitlines()
            self.wall_error = lines[0][:300] if lines else v.status
        else:
            # The lower quartile, not the median: a round slowed by the machine's other work
            # (another judge starting, the harness) would make the share larger, and a larger
            # share makes the candidate faster than the truth; a smaller one only slower.
            self.wall_ms = lower_quartile(walls)
            self.wall_spread = spread(walls)
            self.wall_parts = tuple(statistics.median(p[i] for p in parts) for i in range(3))
            # The reference's process timed its own calls (its code ran there, no candidate's
            # had yet): the rest of the round is the wall's alone.
            self.wall_around_ms = lower_quartile(around) if len(around) == len(walls) else None
            eager = self.eager_ms
            if eager is not None:
                self.wall_overhead_ms = wall_share(self.wall_ms, eager, self.wall_around_ms)
                # Kept for the next candidates beside the baseline only when its rounds agreed:
                # a share measured while the machine was busy is not handed on (the host clock
                # of the evaluator's CPU tests is not a GPU's: its times mean nothing anyway).
                quiet = self.wall_spread <= WALL_KEEP_SPREAD or self.host_clock()
                if self.ctx.baseline is not None and quiet:
                    self.ctx.wall = (
                        self.baseline_key(),
                        self.ctx.baseline[1],  # as old as the baseline: they expire together
                        self.wall_ms,
                        self.wall_parts,
                        list(self.inside_claims[True]),
                        self.wall_around_ms,
                    )
        self.req({"op": "forget"}, expect=("forgotten",)).close()
        if self.arena is not None:
            self.arena.rearm()  # the reference's pages count as untouched again

    def baseline_rounds(self, n: int) -> dict[str, Any]:
        """Eager and torch.compile, timed in rounds of n calls before any candidate process."""
        torch, ctx, cfg = self.torch, self.ctx, self.config
        region, layout = self.main_region
        views = [
            [s.view(region.flat) if s is not None else None for s in row] for row in layout.inputs
        ]
        fns = {"eager": ctx.main.ref}
        if ctx.compiled is not None:
            fns["compiled"] = ctx.compiled
        samples: dict[str, list[float]] = {name: [] for name in fns}
        reps = self.timed_reps()
        for r in range(cfg.warmup + reps):
            order = list(fns) if r % 2 == 0 else list(fns)[::-1]
            for name in order:
                sets = self.draw_sets(n)
                args = [
                    [v if v is not None else x for v, x in zip(views[k], sets[k])] for k in range(n)
                ]
                self.flush_l2()
                self.fill_sets(sets)
                self.sync()
                # The clock starts once the inputs are written (this is the judge's own code:
                # there is nothing to keep from it), so no estimate of the writes is taken out:
                # one measured beside other work made eager 0.0001 ms on the H100.
                started = time.perf_counter()
                with torch.no_grad():
                    for k in range(n):
                        fns[name](*args[k])
                self.sync()
                wall = (time.perf_counter() - started) * 1000.0
                if r >= cfg.warmup:
                    samples[name].append(wall / n)
        from .timing import summarize

        return {name: summarize(v) for name, v in samples.items()}

    def measured_baseline(self, n: int) -> dict[str, Any]:
        """baseline_rounds, measured again while eager's or torch.compile's time per call is
        under the task's physical bound (the candidate's process does not exist yet, so nothing
        of it runs beside them); after BASELINE_TRIES an evaluator error, never a time."""
        from .roofline import roofline

        bound = 0.0
        if self.ctx.work is not None and self.ctx.ceilings is not None:
            bytes_, flops = self.ctx.work
            try:
                bound = roofline(bytes_, flops, self.config.dtype, self.ctx.ceilings).bound_ms
            except ValueError:  # ceilings not measured: no bound to hold them to
                bound = 0.0
        bad = ""
        for attempt in range(BASELINE_TRIES):
            samples = self.baseline_rounds(n)
            bad = impossible_baseline(samples, bound)
            if not bad:
                self.baseline_tries = attempt + 1
                return samples
        raise Verdict(
            "crashed",
            f"the evaluator's baseline measured {bad} per call, under the physical lower bound "
            f"{bound:.4f} ms, in {BASELINE_TRIES} tries: no candidate can be timed against it "
            "(the machine's other work during its rounds, or the evaluator's own fault)",
            rule="evaluator",
        )

    def candidate_rounds(self, n: int) -> Any:
        """The candidate's rounds; every output of every round is checked against eager's."""
        from .timing import summarize

        cfg = self.config
        samples: list[float] = []
        raw: list[float] = []  # the same rounds with nothing taken out (timed_result)
        parts: list[tuple[float, float, float]] = []  # per round: inputs, the candidate, copy
        failures: list[tuple[str, str]] = []
        reps = self.timed_reps()
        overhead = self.wall_overhead_ms or 0.0
        between: list[tuple[float, ...]] = []  # per round: draws, describe, checks, release
        for r in range(cfg.warmup + reps):
            if settled(samples, reps):
                break
            t0 = time.perf_counter()
            sets = self.draw_sets(n)
            t1 = time.perf_counter()
            wall, part, snaps = self.wall_round(n, sets)
            t2 = time.perf_counter()
            # The round's n outputs are held at once because the judge asks for them: their
            # pages are not the candidate's peak (measure_memory takes n - 1 of them out). The
            # cost: a workspace that lives only where later outputs of a round land is not seen
            # either, at most (n - 1) outputs' bytes, within ROUND_BYTES (plan_calls).
            self.held_bytes = max(self.held_bytes, n * self.ctx.main.output_bytes)
            if r >= cfg.warmup:
                samples.append(max(wall / n - overhead, 0.0))
                raw.append(wall / n)
                parts.append(part)
            outs = self.describe_round(snaps, n)
            t3 = time.perf_counter()
            self.check_round(r, outs, sets, failures)
            t4 = time.perf_counter()
            self.req({"op": "release"}, expect=("released",)).close()
            self.note_memory()
            t5 = time.perf_counter()
            spans = ((t0, t1), (t2, t3), (t3, t4), (t4, t5))
            between.append(tuple((b - a) * 1e3 for a, b in spans))
            if failures:
                rule, what = failures[0]
                raise Verdict(
                    "incorrect",
                    f"{what} (outputs of timed calls are checked too: right during the "
                    "checks, wrong while timed)",
                    rule=rule,
                )
        if parts:  # what a round was made of, for the audit (Evaluation.timing_note)
            self.round_parts = tuple(statistics.median(p[i] for p in parts) for i in range(3))
        if between:  # and what the judge did between its clocks (in the exclusive hold too)
            self.between_parts = tuple(statistics.median(b[i] for b in between) for i in range(4))
        self.rounds_timed = len(samples)
        self.raw_candidate = summarize(raw) if raw else None
        return summarize(samples)

    def wall_round(
        self, n: int, sets: list[list[Any]], reference: bool = False
    ) -> tuple[float, tuple[float, float, float], list[Any]]:
        """One timed round in the candidate's process: (milliseconds less the judge's input
        writes, its parts: inputs, the candidate's process, the copy; the judge's copies)."""
        torch = self.torch
        values = [x if not isinstance(x, torch.Tensor) else None for x in sets[0]]
        message = {"op": "round", "calls": n, "values": values}
        if reference:
            message["reference"] = True
        self.flush_l2()
        self.sync()
        self.sampler_pause(True)
        started = time.perf_counter()
        self.fill_sets(sets)
        self.sync()
        filled = time.perf_counter()
        got = self.req(message, expect=("spans",))
        replied = time.perf_counter()
        try:
            snaps = self.snapshot(got.message.get("spans"), n)
            self.sync()
            stopped = time.perf_counter()
        finally:
            got.close()
            self.sampler_pause(False)
        parts = ((filled - started) * 1e3, (replied - filled) * 1e3, (stopped - replied) * 1e3)
        inside = got.message.get("inside")
        if (  # its process's claim, for the audit; anything but two numbers is ignored
            isinstance(inside, list)
            and len(inside) == 2
            and all(isinstance(v, (int, float)) and math.isfinite(v) for v in inside)
        ):
            self.inside_claims[reference].append(tuple(float(v) for v in inside))
        return (stopped - started) * 1e3 - self.fill_ms, parts, snaps

    def snapshot(self, spans: Any, n: int) -> list[Any]:
        """Inside the clock: the judge's own copy of each output's bytes (GPU: from the arena
        where the candidate left them; CPU: the slots its process copied them into)."""
        if not (isinstance(spans, list) and len(spans) == n):
            raise Verdict(
                "rejected", "a round's reply does not name every call's outputs", rule="protocol"
            )
        if self.arena is None:
            return [self.rebuild(s, [], "main", f"timed call {k}") for k, s in enumerate(spans)]
        copies = []
        self.snap_cursor = 0
        for leaves in spans:
            if not isinstance(leaves, list):
                raise Verdict("rejected", "a malformed round reply", rule="protocol")
            row = []
            for leaf in leaves:
                ok = (
                    isinstance(leaf, list)
                    and len(leaf) == 2
                    and all(isinstance(v, int) for v in leaf)
                )
                if not ok or leaf[1] > self.output_limit():
                    raise Verdict("rejected", "a malformed round reply", rule="protocol")
                try:
                    row.append(
                        (leaf[0], leaf[1], self.snap_into(self.arena.view(leaf[0], leaf[1])))
                    )
                except ValueError:
                    raise Verdict(
                        "rejected", "a timed output outside the arena", rule="protocol"
                    ) from None
            copies.append(row)
        return copies

    def snap_into(self, src):
        """Copy `src` (arena bytes) into the judge's snapshot buffer, allocated once per
        evaluation so that no round pays for an allocation the calibration did not."""
        torch = self.torch
        n = src.numel()
        start = self.snap_cursor
        end = start + -(-n // 512) * 512
        if getattr(self, "snap_buf", None) is None or self.snap_buf.numel() < end:
            out = self.ctx.main
            size = max(end, self.calls * (out.output_bytes + 512 * max(1, len(out.out_meta))))
            self.snap_buf = torch.empty(size, dtype=torch.uint8, device=src.device)
        out = self.snap_buf[start : start + n]
        out.copy_(src)
        self.snap_cursor = end
        return out

    def describe_round(self, snaps: list[Any], n: int) -> list[Any]:
        """After the clock: the outputs' structure, each leaf cut from the judge's copy."""
        got = self.req({"op": "describe"}, expect=("outputs",))  # its state is checked too
        if self.arena is None:
            got.close()
            return snaps
        try:
            outs = got.message.get("outputs")
            if not (isinstance(outs, list) and len(outs) == n):
                raise Verdict("rejected", "the round's outputs were not described", rule="protocol")
            return [
                self.rebuild(o, [], "main", f"timed call {k}", snapshot=snaps[k])
                for k, o in enumerate(outs)
            ]
        finally:
            got.close()

    def flush_l2(self) -> None:
        if self.w.cuda and self.config.l2_flush and not self.config.host_clock_for_tests:
            from .timing import flush_buffer

            flush_buffer().zero_()

    def timed_reps(self) -> int:
        out = self.ctx.main.output_bytes
        reps = self.config.reps
        if out <= 0:
            return reps
        return max(min(reps, MIN_TIMED_REPS), min(reps, TIMED_OUTPUT_BYTES // out))


def plan_calls(one_ms: float, set_bytes: int, most: int) -> int:
    """Calls per round: enough of eager's `one_ms` to span ROUND_MS, at most `most` calls and
    ROUND_BYTES of input and output sets."""
    by_time = math.ceil(ROUND_MS / one_ms)
    return max(1, min(most, by_time, ROUND_BYTES // max(set_bytes, 1)))


def settled(samples: list[float], reps: int) -> bool:
    """The candidate's rounds so far give a settled median (see SETTLED_MIN)."""
    if len(samples) < min(SETTLED_MIN, reps) or len(samples) >= reps:
        return len(samples) >= reps
    if len(samples) % 5:  # looked at every fifth round
        return False
    return spread(samples) <= SETTLED_SPREAD  # inf where the median is not positive


def _interpreter_timings() -> Timings:
    return Timings(
        meaningful=False,
        note="no CUDA device: candidates ran under the Triton "
        "interpreter, which checks correctness only; times are not meaningful",
    )
