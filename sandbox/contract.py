"""The candidate contract, in one place: the dtypes a task runs at, the precision policies, and
what a candidate may import.

The CLI's choices, EvalConfig and RunConfig, the static check (static/check.py), the export's
standalone check and the coder's prompt all take these from here, so they cannot disagree.
The names cost no torch import here (`torch_dtypes()` imports torch when called), so the
CLI can offer them as choices before anything heavy is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    import torch

# The dtypes a task's model and floating inputs are cast to (as KernelBench does).
DType = Literal["fp32", "fp16", "bf16"]
DTYPE_NAMES: tuple[DType, ...] = get_args(DType)

# strict: fp32 must be fp32-accurate; tf32-ok: TF32 is acceptable (see compare.py's floors).
PrecisionPolicy = Literal["strict", "tf32-ok"]
PRECISION_POLICIES: tuple[PrecisionPolicy, ...] = get_args(PrecisionPolicy)

# The modules a candidate may import, in the order the rules and the prompt list them, each with
# why it may (or what of it it may not use; the coder's prompt shows the note in parentheses when
# there is one). The static check allows these roots and their submodules
# (triton.language.extra, ...) minus what its own tables refuse (torch.compile, streams, flags...).
IMPORTS: dict[str, tuple[str, str]] = {
    # name: (why it is allowed, the prompt's note: what of it stays refused)
    "torch": (
        "tensors, nn.Module, torch.autograd.Function: the program being replaced",
        "not torch.compile, torch._dynamo, torch._inductor, CUDA streams or backend flags",
    ),
    "triton": ("the kernels: triton.jit, autotune, heuristics, cdiv", ""),
    "triton.language": ("the kernel language (and its libdevice under .extra)", ""),
    "math": ("pure functions on numbers", ""),
    "typing": ("annotations (get_type_hints, which evaluates strings, stays refused)", ""),
    "functools": (
        "lru_cache, partial, reduce (singledispatch, which evaluates strings, stays refused)",
        "",
    ),
    "itertools": ("pure iteration helpers", ""),
    "operator": ("pure functions (attrgetter with a computed or private name stays refused)", ""),
    "dataclasses": ("plain records", ""),
    "collections": ("plain containers", ""),
    "enum": ("constants", ""),
    "numbers": ("abstract number types", ""),
    "__future__": ("annotations", ""),
    # The three below may be used for a few names only (LIMITED_IMPORTS). Accepted (issue 20)
    # because published kernels use them and, in the judge's isolation, they cannot cheat: they
    # run in the candidate's own sandboxed process, which can reach neither the judge's objects
    # nor files or the network (bubblewrap, seccomp, the guard), and its outputs are checked.
    "logging": (
        "log messages (logger = logging.getLogger(__name__); logger.debug/info/warning)",
        "getLogger, the level constants and the module's log functions only",
    ),
    "warnings": ("warnings.warn and the filters", "warn, filters and catch_warnings only"),
    "contextlib": ("nullcontext (an optional `with`)", "nullcontext only"),
}
ALLOWED_IMPORTS: tuple[str, ...] = tuple(IMPORTS)
ALLOWED_ROOTS: frozenset[str] = frozenset(name.partition(".")[0] for name in ALLOWED_IMPORTS)

# Modules of which a candidate may use only the names listed: `module.name` or
# `from module import name` for any other name (a submodule included) is refused, with the why.
LIMITED_IMPORTS: dict[str, tuple[frozenset[str], str]] = {
    "logging": (
        frozenset(
            {
                *("getLogger", "Logger", "LoggerAdapter", "NullHandler", "getLevelName"),
                *("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL", "NOTSET"),
                *("debug", "info", "warning", "error", "exception", "critical", "log"),
            }
        ),
        # logging.config turns strings into objects and code (dictConfig's "()" factories,
        # fileConfig's eval), logging.handlers opens files and sockets and starts threads,
        # basicConfig/FileHandler write files, currentframe hands out frames.
        "a candidate may only log through logging.getLogger(...) (and the level constants and "
        "module functions debug/info/warning/error/...): logging.config turns strings into "
        "code, handlers open files and sockets",
    ),
    "warnings": (
        frozenset({"warn", "simplefilter", "filterwarnings", "catch_warnings", "resetwarnings"}),
        # showwarning/formatwarning are hooks: replacing them is a store on a module (refused).
        "a candidate may only call warnings.warn, simplefilter, filterwarnings, resetwarnings "
        "and catch_warnings",
    ),
    "contextlib": (
        frozenset({"nullcontext"}),
        # suppress and ExitStack swallow exceptions as a try would; contextmanager makes a
        # generator a context manager whose exit the evaluator does not control; chdir moves
        # the process.
        "only contextlib.nullcontext is allowed (suppress and ExitStack swallow errors as a try "
        "would); write `with contextlib.nullcontext():` or an if",
    ),
}


def torch_dtypes() -> dict[str, torch.dtype]:
    """fp32/fp16/bf16 -> the torch dtype."""
    import torch

    return dict(zip(DTYPE_NAMES, (torch.float32, torch.float16, torch.bfloat16), strict=True))
