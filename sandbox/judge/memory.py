"""The judge's account of device memory: the arena's size, and the candidate's peak measured
from outside its process against the memory rule's limit.

A part of Evaluation (evaluation.py), which mixes it in. The arena (the candidate's device
memory, the judge's: arena.py) is sized before the candidate's process is spawned, within what
the device has free once the judge keeps room for its own work (`arena_bytes`); the driver's
account of that process (nvml.py) is watched from before its code is built (`watch_memory`).
The candidate's peak is the arena pages it touched, its inputs and what the driver says it holds
past both, less the outputs the judge itself asked it to hold beyond one call's
(`measure_memory`); over the limit it is rejected (`check_memory`), and the result reports it
(`memory`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ..results import Memory
from .verdict import Verdict, _gib

# The candidate's peak may reach max(MEMORY_FACTOR x the reference's, reference + MEMORY_SLACK).
MEMORY_FACTOR = 4
MEMORY_SLACK = 1 << 30
# Device memory the judge keeps beside the arena past its estimate of its own work.
JUDGE_MARGIN = 2 << 30


class MemoryChecks:
    """The arena's size and the candidate's memory (the attributes are Evaluation's)."""

    if TYPE_CHECKING:  # the attributes and methods of Evaluation, which this is a part of
        calls: int
        sampler: Any
        context_bytes: int
        held_bytes: int
        regions_bytes: int
        candidate_peak: int | None
        memory_parts: str

        def __getattr__(self, name: str) -> Any: ...

    # -- the arena and the driver's account ----------------------------------------------------

    def watch_memory(self) -> None:
        """The driver's account of the candidate's process, from here on (nvml.py): what it
        holds now (its CUDA context, the libraries the wall's calibration loaded) is the
        baseline, past which its code's device memory shows."""
        if self.w.cuda:
            from .nvml import Sampler, available

            if available() and self.proc.host is not None:
                self.sampler = Sampler(self.w.device.index or 0)
                self.sampler.pids = {self.proc.host}
                self.sampler.sample()
                self.context_bytes = self.sampler.peak
                self.sampler.peak = 0
                self.sampler.__enter__()

    def arena_bytes(self) -> int:
        """The arena is the candidate's device memory limit, within what the device has free
        once the judge keeps room for its own work (judge_bytes); never less than one
        reference call needs beside a timed round's outputs (at least the one output the reuse
        check holds besides: `reuse_calls`), the room the wall's calibration and an honest
        candidate take. Without the held output, InstanceNorm at KernelBench's size (7.5 GB
        outputs, a call's peak 15 GB) got a 15 GiB arena on the H200 and every honest candidate
        ended `crashed [evaluator]` in the reuse check.

        The limit is the candidate's own peak: the outputs the judge asks it to hold past one
        call's (a timed round's, the reuse check's) come on top. Capped at the limit, an outer
        product (64 MiB out of 32 KiB in, 32 calls a round) ran out of its 1.06 GiB arena in
        its first timed round on the H100: `rejected [memory]` for an honest kernel."""
        torch = self.torch
        cap = (self.limit_bytes() or (8 << 30)) + (self.most_held_calls() - 1) * (
            self.call_output_bytes()
        )
        torch.cuda.empty_cache()  # blocks the judge's setup freed count as free
        free, _ = torch.cuda.mem_get_info()
        shape = self.ctx.main
        # A timed round holds its calls' outputs at once (up to MAX_CALLS small ones).
        held = max(1, self.calls) * self.call_output_bytes()
        floor = min(cap, (shape.ref_peak or shape.footprint) + held + (1 << 30))
        return max(256 << 20, min(cap, max(floor, free - self.judge_bytes())))

    def most_held_calls(self) -> int:
        """The most calls' outputs the judge has the candidate hold at once: a timed round's,
        or the reuse check's with the call after them (the drift check's unheld calls run
        beside the held outputs). Asked before the arena exists and before any call is timed,
        reuse_calls gives its most (REUSE_BYTES, no slow-call bound); the arena's quarter only
        lowers it later."""
        return max(self.calls, self.reuse_calls() + 1)

    def judge_bytes(self) -> int:
        """What the judge itself allocates beside the arena while it checks and times: the
        float64 twin of a reference call (twice its peak) and the float64 error it computes
        from it (one more), the pristine inputs with eager's and the candidate's outputs (twice
        the footprint), one round's snapshot of the outputs, and a margin. Measured on the H200
        at KernelBench's sizes (Swish, Frobenius norm, InstanceNorm: 6-15 GB footprints), two
        footprints and two reference peaks left the judge short: its float64 reference then
        fell back to host memory, past the worker's limit."""
        shape = self.ctx.main
        ref = shape.ref_peak or shape.footprint
        return 3 * ref + 2 * shape.footprint + self.calls * self.call_output_bytes() + JUDGE_MARGIN

    def call_output_bytes(self) -> int:
        """One call's outputs as the judge holds them: their bytes and a descriptor each."""
        shape = self.ctx.main
        return shape.output_bytes + 512 * max(1, len(shape.out_meta))

    def arena_short(self) -> bool:
        """The arena is smaller than the memory rule's limit (the device had no more room)."""
        limit = self.limit_bytes()
        return limit is not None and self.arena.nbytes + (64 << 20) < limit

    def sampler_pause(self, paused: bool) -> None:
        if self.sampler is not None:
            (self.sampler.paused.set if paused else self.sampler.paused.clear)()

    def note_memory(self) -> None:
        if self.sampler is not None and self.sampler.paused.is_set() is False:
            self.sampler.sample()

    # -- the candidate's peak ------------------------------------------------------------------

    def limit_bytes(self) -> int | None:
        if self.config.max_memory_gb is not None:
            return int(self.config.max_memory_gb * 2**30)
        ref = self.ctx.main.ref_peak
        return None if ref is None else max(MEMORY_FACTOR * ref, ref + MEMORY_SLACK)

    def measure_memory(self) -> None:
        """The candidate's device memory, from outside its process: the arena pages it touched
        (its parameters, outputs, workspace), the input region it reads, and what the driver
        says it holds past both (taken outside the allocator); less the outputs the judge
        itself asked it to hold at once, beyond one call's."""
        if self.arena is None or self.candidate_peak is not None:
            return
        touched = self.arena.touched_bytes()
        outside = 0
        if self.sampler is not None:
            self.sampler.sample()
            mapped = self.arena.nbytes + self.regions_bytes
            outside = max(0, self.sampler.peak - self.context_bytes - mapped)
        extra_held = max(0, self.held_bytes - self.ctx.main.output_bytes)
        self.candidate_peak = max(0, touched - extra_held) + self.ctx.main.input_bytes + outside
        self.memory_parts = (
            f"arena pages touched {_gib(touched)}, less {_gib(extra_held)} of outputs held at "
            f"the judge's demand past one call's; inputs {_gib(self.ctx.main.input_bytes)}; "
            f"past both by the driver's account {_gib(outside)}"
        )

    def check_memory(self) -> None:
        self.measure_memory()
        limit, peak = self.limit_bytes(), self.candidate_peak
        if limit is None or peak is None or peak <= limit:
            return
        ref = self.ctx.main.ref_peak
        raise Verdict(
            "rejected",
            f"the candidate's forward peaked at {_gib(peak)} of device memory (measured by the "
            f"judge: the arena pages it touched, its inputs, and what the driver says it took "
            f"past them); the reference peaks at {_gib(ref)} and a candidate may use "
            f"max({MEMORY_FACTOR}x that, that + 1 GiB) = {_gib(limit)}. Allocate less (no "
            "workspace sized far beyond the task), or allow it with --max-memory GB.",
            rule="memory",
        )

    def memory(self) -> Memory:
        shape = self.ctx.main
        with contextlib.suppress(Exception):
            self.measure_memory()
        judge = self.torch.cuda.max_memory_allocated() if self.w.cuda else None
        note = (
            "measured by the judge: "
            + (self.memory_parts or "arena pages touched, inputs, the driver's account past them")
            if self.w.cuda
            else "device memory is measured on CUDA only (the interpreter runs in host memory)"
        )
        return Memory(
            footprint_bytes=shape.footprint,
            reference_peak_bytes=shape.ref_peak,
            candidate_peak_bytes=self.candidate_peak,
            judge_peak_bytes=judge,
            limit_bytes=self.limit_bytes(),
            note=note,
        )
