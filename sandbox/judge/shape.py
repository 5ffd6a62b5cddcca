"""A task at one setting of its sizes, as the judge holds it (Shape), and everything about a task
that does not depend on the candidate (TaskContext), which a judge keeps per task; with the
small helpers that build them (the output's structure on meta tensors, byte counts, the
reference's floating dtype). worker.py builds them; evaluation.py and timed.py read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Shape:
    """The task at one setting of its size constants: reference models and what they produce."""

    sizes: dict[str, int]
    ns: dict[str, Any]
    init_inputs: list[Any]
    ref: Any  # the reference nn.Module, parameters re-drawn, in the evaluation dtype
    ref64: Any  # the same values in float64: the yardstick for precision
    out_meta: list[tuple[tuple[int, ...], Any]]  # (shape, dtype) of each tensor output
    overrides: dict[str, Any] = field(default_factory=dict)  # what task_namespace was given
    seed: int = 0  # the seed of get_init_inputs and of the parameters' re-draw
    out_template: Any = None  # the reference's output with meta tensors: its structure only
    input_bytes: int = 0
    output_bytes: int = 0
    param_bytes: int = 0
    ref_peak: int | None = None  # peak device memory of one reference call (CUDA only)
    _ref64_host: Any = None

    @property
    def footprint(self) -> int:
        """Bytes of the reference's inputs, outputs and parameters."""
        return self.input_bytes + self.output_bytes + self.param_bytes

    def ref64_on_host(self):
        """The float64 reference moved to the host, for a task whose float64 run does not fit
        on the device: from then on every float64 reference of this shape is computed there."""
        if self._ref64_host is None:
            self._ref64_host = self.ref64.to("cpu")
        return self._ref64_host


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
    # Eager's and torch.compile's rounds by the judge's clock, kept for the next candidates of
    # the same config (timed.py BASELINE_TTL_S): (config key, when, calls, fill ms, samples).
    baseline: tuple[str, float, int, float, dict[str, Any]] | None = None
    # The wall's share of a round (timed.py calibrate_wall), measured in an earlier candidate's
    # process before its code was imported, kept beside the baseline and for as long:
    # (config key, when, the reference's ms a call through the wall, its round parts, claims,
    # the round less its process's own calls per call, or None where it gave no account).
    wall: (
        tuple[str, float, float, tuple[float, ...], list[tuple[float, ...]], float | None] | None
    ) = None


def template_of(out: Any, torch) -> Any:
    """The output's structure with every tensor replaced by a meta tensor of its shape and
    dtype (structure checks need no values, and a task's outputs can fill the device)."""
    if isinstance(out, torch.Tensor):
        return torch.empty(out.shape, dtype=out.dtype, device="meta")
    if isinstance(out, (tuple, list)):
        return type(out)(template_of(v, torch) for v in out)
    if isinstance(out, dict):
        return {k: template_of(v, torch) for k, v in out.items()}
    return out


def nbytes(tensors: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def float_dtype_of(model, torch):
    for p in list(model.parameters()) + list(model.buffers()):
        if p.is_floating_point():
            return p.dtype
    return torch.get_default_dtype()
