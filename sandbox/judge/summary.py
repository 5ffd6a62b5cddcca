"""Human-readable summaries of an EvalResult or a Baseline, as `kernelwright eval` prints them."""

from __future__ import annotations

from ..results import Baseline, EvalResult, Memory, Roofline, Timing, Timings


def format_result(result: EvalResult, task_name: str = "") -> str:
    """Status first, then why (rule, error lines or mismatch), then times, speedups, roofline."""
    head = f"{task_name}: " if task_name else ""
    lines = [f"{head}{result.status.upper()}" + (f" [{result.rule}]" if result.rule else "")]
    if result.message:
        lines += ["  " + line for line in result.message.strip().splitlines()[:40]]
    c = result.correctness
    if c is not None and c.trials:
        shapes = "; ".join(_sizes(s) for s in c.shapes) or "default"
        lines.append(
            f"  correctness: {c.trials} trials at {shapes}; max abs err "
            f"{c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g} "
            f"(atol {c.atol:g}, rtol {c.rtol:g})"
        )
        if c.err_vs_fp64 is not None:
            lines.append(
                f"  precision ({c.precision_policy}): error vs float64 "
                f"{c.err_vs_fp64:.2e}, eager's {c.eager_err_vs_fp64:.2e}, "
                f"allowed {c.precision_limit:.2e} (on the output nearest its limit)"
            )
        if c.variant_note:
            lines.append(f"  shapes: {c.variant_note}")
    if result.timings is not None:
        lines += _timing_lines(result.timings)
    if result.speedup_eager is not None:
        lines.append(
            f"  speedup: {result.speedup_eager:.2f}x vs eager"
            + (
                f", {result.speedup_compiled:.2f}x vs torch.compile"
                if result.speedup_compiled is not None
                else ""
            )
        )
    if result.roofline is not None:
        lines.append("  " + _roofline_line(result.roofline))
    for k in result.kernels:
        stats = [f"{k.launches} launch(es)"]
        if k.registers is not None:
            stats.append(f"{k.registers} registers")
        if k.spills:
            stats.append(f"{k.spills} spills")
        if k.shared_bytes is not None:
            stats.append(f"{k.shared_bytes} B shared")
        if k.num_warps is not None:
            stats.append(f"{k.num_warps} warps, {k.num_stages} stages")
        lines.append(f"  kernel {k.name}: " + ", ".join(stats))
    if result.memory is not None:
        lines.append("  " + _memory_line(result.memory))
    lines += [f"  note: {n}" for n in result.notes]
    env = result.environment
    if env.isolation:
        lines.append(f"  isolation: {', '.join(env.isolation)}")
    if env.torch or env.triton:  # a verdict before any judge ran (a file that is not Python)
        lines.append(
            f"  environment: {env.gpu or env.device}, torch {env.torch}, triton "
            f"{env.triton}" + (" (Triton interpreter)" if env.interpreter else "")
        )
    return "\n".join(lines)


def _memory_line(m: Memory) -> str:
    """Peaks of the candidate and the reference beside the task's footprint, in GiB."""
    if m.candidate_peak_bytes is None and m.reference_peak_bytes is None:
        return f"memory: footprint {_gib(m.footprint_bytes)}" + (f" ({m.note})" if m.note else "")
    text = (
        f"memory: candidate peak {_gib(m.candidate_peak_bytes)}, reference peak "
        f"{_gib(m.reference_peak_bytes)}, footprint {_gib(m.footprint_bytes)}"
    )
    if m.limit_bytes is not None:
        text += f", limit {_gib(m.limit_bytes)}"
    if m.judge_peak_bytes is not None:
        text += f"; judge peak {_gib(m.judge_peak_bytes)}"
    return text


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def format_baseline(b: Baseline, task_name: str = "") -> str:
    head = f"{task_name}: " if task_name else ""
    lines = [f"{head}baseline {b.status}"]
    if b.message:
        lines += ["  " + line for line in b.message.strip().splitlines()[:20]]
    if b.timings is not None:
        lines += _timing_lines(b.timings)
    if b.roofline is not None:
        lines.append("  " + _roofline_line(b.roofline, of="eager"))
    if b.setup_s:
        steps = ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in b.setup_s.items())
        lines.append(f"  setup (s): {steps}; wall {b.wall_s:.2f}")
    env = b.environment
    if env.torch or env.triton:
        lines.append(
            f"  environment: {env.gpu or env.device}, torch {env.torch}, triton {env.triton}"
        )
    return "\n".join(lines)


def _timing_lines(t: Timings) -> list[str]:
    if not t.meaningful:
        # The note often says it already ("... times are not meaningful"): say it once.
        note = t.note.removesuffix("; times are not meaningful").rstrip(" ;")
        return [f"  times: not meaningful ({note})" if note else "  times: not meaningful"]
    lines = []
    for name, timing in (
        ("candidate", t.candidate),
        ("eager", t.eager),
        ("torch.compile", t.compiled),
    ):
        if timing is not None:
            lines.append(f"  {name:>13}: {_timing(timing)}")
    if t.compiled_error:
        lines.append(f"  torch.compile: {t.compiled_error}")
    return lines


def _timing(t: Timing) -> str:
    return (
        f"median {t.median_ms:.4f} ms (IQR ±{t.spread * 50:.1f}%, min {t.min_ms:.4f}, "
        f"max {t.max_ms:.4f}, {t.reps} reps)"
    )


def _roofline_line(r: Roofline, of: str = "candidate") -> str:
    frac = f"{r.fraction:.0%} of roofline ({of})" if r.fraction is not None else "roofline"
    # fp32 strict: the fraction is of the fastest legal arithmetic, the bound of the fastest.
    apart = bool(r.policy_ms) and r.policy_tflops != r.peak_tflops
    bound, tflops = (r.policy_ms, r.policy_tflops) if apart else (r.bound_ms, r.peak_tflops)
    line = (
        f"{frac}: bound {bound:.4f} ms, {r.limiter}-bound "
        f"({r.bytes / 1e9:.3f} GB at {r.bandwidth_gbps:.0f} GB/s, {r.flops / 1e9:.2f} GFLOP "
        f"at {tflops:.0f} TFLOP/s"
    )
    if not apart:
        return line + ")"
    beat = f"no time may beat {r.bound_ms:.4f} ms (at {r.peak_tflops:.0f} TFLOP/s)"
    return f"{line}, {r.policy}); {beat}"


def _sizes(sizes: dict[str, int | tuple[int, ...]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "default"
