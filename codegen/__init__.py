"""Deterministic Triton codegen: trace a task with torch.fx, fuse, and write a candidate file.

    from kernelwright.codegen import generate
    result = generate("task.py", dtype="fp32")  # or a kernelwright.sandbox.task.Task
    result.source     # the candidate file (ModelNew + @triton.jit kernels), or None
    result.reason     # why there is none ("no offline candidate: ..."), or what was fused
    result.groups     # one readable line per fused group, for the report
    result.tunables   # {"POINTWISE_BLOCK": (512, 1024, ...), ...}: the file's `# tune:` constants

A compiler from torch.fx to Triton; it knows nothing of the agents (the coder calls it). The
task is loaded by kernelwright.sandbox.task, as the evaluator loads it (one parse of its size
constants). Modules, in pipeline order: trace (fx + meta-device shapes), normalize (canonical
ops, ops.py tables, decompositions; its op_ methods in normalize_pointwise / _reductions / _norms
/ _matmul over normalize_builder), symbolic (size-dependent constants), partition (fused groups),
gather (embedding lookups a row group reads from the table itself), layout (row groups over
inputs stored in a permuted order), kernel_pointwise / kernel_row (its streamed passes in
kernel_row_stream) / kernel_split / kernel_matmul (the kernels, with body, index, group_writer and
template), pyforward (ModelNew), assemble (the file), api (generate).

May import: `errors.py`, `sandbox/` (the task loader, the parse lock, the contract's dtypes).
No agent vocabulary: never `agents/`, `run/` or `commands/`.
"""

from .api import FusionResult, generate

__all__ = ["FusionResult", "generate"]
