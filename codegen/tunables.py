"""Launch constants the emitted file declares (`NAME = v  # tune: ...`) and their defaults, and
the one home of the `# tune:` format: `tune_line` writes a declaration, `tune_constants` reads
every declaration of a file (the codegen's, an LLM's, a person's) and `with_values` sets them.

Defaults are what we expect to be good on an H200 (132 SMs, ~4.8 TB/s HBM3e, 50 MB L2); the
tester's sweep (agents/tester.py) tries the listed values and writes the winner back into the
file.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from ..sandbox.static.pyparse import parse


@dataclass(frozen=True)
class Tunable:
    default: int
    choices: tuple[int, ...]
    why: str
    # A different default for fp16/bf16 runs (tensor-core tiles), where it differs.
    half_default: int | None = None


TUNABLES: dict[str, Tunable] = {
    "POINTWISE_BLOCK": Tunable(
        1024,
        (512, 1024, 2048, 4096),
        "Elements per program of a pointwise kernel: 1024 with 4 warps is 8 fp32 per thread, two "
        "128-bit loads in flight per operand, enough to keep HBM busy (~90% of 4.8 TB/s expected).",
    ),
    "POINTWISE_WARPS": Tunable(4, (2, 4, 8), "Warps per pointwise program."),
    "ROW_MAX_BLOCK": Tunable(
        16384,
        (4096, 8192, 16384, 32768),
        "Rows up to this many elements are reduced in registers in one read (16384 fp32 over "
        "16 warps is 32 values per thread, within the 128 registers a 512-thread program "
        "gets); longer rows loop over blocks, one read per pass (online max/sum for softmax "
        "and block-wise Welford for variance keep it to one statistics pass).",
    ),
    "ROW_LOOP_BLOCK": Tunable(
        2048, (1024, 2048, 4096), "Elements per step when a row is too long for registers."
    ),
    "ROW_WARPS": Tunable(
        0,
        (0, 4, 8, 16),
        "Warps per row program; 0 picks from the tile: 4 up to 2048 elements, 8 up to 8192, "
        "16 above (32 values per thread at most).",
    ),
    "ROW_SPLIT_WAVES": Tunable(
        4,
        (0, 2, 4, 8),
        "A row group whose rows are fewer than this many per SM, and longer than ROW_MAX_BLOCK, "
        "splits each row over several programs (SPLIT_PROGRAMS in all): partial statistics, "
        "combined per row in split order, then the outputs. One program per row would leave "
        "SMs idle (16 rows: 16 of 132); 4 streaming programs per SM keep enough loads in "
        "flight. 0: one program per row always.",
    ),
    "SPLIT_PROGRAMS": Tunable(
        1024,
        (264, 528, 1024, 2048),
        "Programs of a split reduction (whole-tensor or per-channel statistics): several per SM "
        "(132 on an H200) so the single read of the input runs at full bandwidth.",
    ),
    "SPLIT_BLOCK": Tunable(2048, (1024, 2048, 4096), "Elements per step of a split reduction."),
    "MATMUL_BLOCK_M": Tunable(64, (32, 64, 128), "Output tile rows.", half_default=128),
    "MATMUL_BLOCK_N": Tunable(64, (32, 64, 128, 256), "Output tile columns.", half_default=128),
    "MATMUL_BLOCK_K": Tunable(32, (16, 32, 64), "Reduction step.", half_default=64),
    "MATMUL_WARPS": Tunable(4, (4, 8), "Warps per tile.", half_default=8),
    "MATMUL_STAGES": Tunable(3, (2, 3, 4, 5), "Software-pipelining depth of the K loop."),
    "MATMUL_TF32X3": Tunable(
        0,
        (0, 1),
        "fp32 inputs: 0 multiplies in exact fp32 (input_precision='ieee', CUDA cores, what "
        "cuBLAS SGEMM does); 1 uses tf32x3 (three TF32 tensor-core products, error close to "
        "fp32, several times the throughput on Hopper). Ignored for fp16/bf16 inputs.",
    ),
    "CONV_IMPL": Tunable(
        0,
        (0, 1, 2),
        "Convolutions: 0 is torch's (cuDNN), its epilogue fused in one pointwise pass; 1 the "
        "Triton implicit GEMM with the epilogue in its store, fp32 multiplied exactly (ieee); 2 "
        "the same with tf32x3 for fp32 (1 and 2 are the same kernel for fp16/bf16). torch's is "
        "the default: the Triton kernel is not timed on the H200 yet, and the sweep measures all "
        "three on a verified candidate, keeping cuDNN where it wins.",
    ),
    "CONV_BLOCK_M": Tunable(64, (32, 64, 128), "Output pixels per tile.", half_default=128),
    "CONV_BLOCK_N": Tunable(64, (32, 64, 128), "Output channels per tile."),
    "CONV_BLOCK_K": Tunable(32, (16, 32, 64), "Reduction step (input channel x tap)."),
    "CONV_WARPS": Tunable(4, (4, 8), "Warps per tile."),
    "POOL_BLOCK": Tunable(
        256,
        (128, 256, 512, 1024),
        "Output elements per pooling program, one per lane: each lane loads its window's taps "
        "(neighbouring lanes read neighbouring inputs, so the loads coalesce).",
    ),
    "POOL_WARPS": Tunable(4, (2, 4, 8), "Warps per pooling program."),
    "CONV_STAGES": Tunable(3, (2, 3, 4), "Software-pipelining depth of the K loop."),
}


def declaration(name: str, dtype: str) -> list[str]:
    """The commented module-level line(s) for one tunable."""
    from .pysrc import comment_lines

    t = TUNABLES[name]
    value = t.half_default if (dtype != "fp32" and t.half_default is not None) else t.default
    return [*comment_lines(t.why, ""), tune_line(name, value, t.choices)]


# -- the `# tune:` format: `NAME = 1024  # tune: 512, 1024, 2048` --------------------------------
# A module-level assignment of an int literal to a name, on one line, with a comment that starts
# with TUNE_MARK and lists the values to try, separated by commas.
TUNE_MARK = "tune:"


def tune_line(name: str, value: int, choices: Iterable[int]) -> str:
    """One declaration: `NAME = value  # tune: c1, c2, ...`."""
    listed = ", ".join(str(c) for c in choices)
    return f"{name} = {value}  # {TUNE_MARK} {listed}"


@dataclass(frozen=True)
class TuneConstant:
    """A module-level int constant with a `# tune: v1, v2, ...` comment."""

    name: str
    value: int
    options: tuple[int, ...]
    line: int  # 1-based
    col: int  # where the value starts on that line
    end_col: int


def tune_comments(source: str) -> dict[int, tuple[int, ...]]:
    """{line: values} for each `# tune: a, b, c` comment (read with tokenize, not by regex)."""
    found: dict[int, tuple[int, ...]] = {}
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        body = tok.string.lstrip("#").strip()
        if not body.startswith(TUNE_MARK):
            continue
        try:
            values = tuple(int(v) for v in body[len(TUNE_MARK) :].split(",") if v.strip())
        except ValueError:
            continue  # a malformed list is ignored, not guessed at
        if values:
            found[tok.start[0]] = values
    return found


def tune_constants(source: str) -> list[TuneConstant]:
    """The sweepable constants of a candidate file, in file order."""
    try:
        tree = parse(source)
        comments = tune_comments(source)
    except (SyntaxError, tokenize.TokenError):
        return []
    out = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Constant)):
            continue
        if type(value.value) is not int or node.lineno not in comments:
            continue
        out.append(
            TuneConstant(
                target.id,
                value.value,
                comments[node.lineno],
                node.lineno,
                value.col_offset,
                value.end_col_offset or value.col_offset,
            )
        )
    return out


def with_values(source: str, values: dict[str, int]) -> str:
    """`source` with the named tunables set to `values` in place (comments kept)."""
    lines = source.splitlines(keepends=True)
    for t in tune_constants(source):
        if t.name in values and values[t.name] != t.value:
            line = lines[t.line - 1]
            lines[t.line - 1] = line[: t.col] + str(values[t.name]) + line[t.end_col :]
    return "".join(lines)
