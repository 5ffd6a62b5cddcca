"""How a candidate's failure becomes a refusal: its exception classified (exit, compile error,
out of memory, a fault, an out-of-bounds access under the interpreter) with the candidate's own
frames, and ModelNew's constructor checked against Model's. Trusted code of the candidate
process (process.py); the judge turns a refusal into the verdict.
"""

from __future__ import annotations

import inspect
import os
import traceback

import torch

from ..errors import KernelwrightError


class Refusal(KernelwrightError):
    """A failure of the candidate: becomes {"error": ...} in the reply."""

    fault = "candidate"

    def __init__(self, status: str, message: str, rule: str | None = None):
        super().__init__(message)
        self.status, self.message, self.rule = status, message, rule


def check_signature(cls: type, reference: type) -> None:
    ref_params, new_params = _init_params(reference), _init_params(cls)
    if ref_params != new_params:
        raise Refusal(
            "rejected",
            f"ModelNew.__init__({', '.join(new_params)}) must take the same arguments as "
            f"Model.__init__({', '.join(ref_params)})",
            "signature",
        )


def _init_params(cls) -> list[str]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    return [
        p.name if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) else f"*{p.name}"
        for p in list(sig.parameters.values())[1:]
    ]


def classify(e: BaseException, what: str, path: str, cuda: bool) -> Refusal:
    """A candidate's exception as a refusal: exit, compile error, out of memory, CUDA fault."""
    text = _candidate_traceback(e, path)
    if isinstance(e, SystemExit):
        return Refusal(
            "runtime_error",
            f"the candidate called exit() while {what}: a result is judged by the evaluator, "
            "never reported by the candidate",
            "exit",
        )
    bounds = _out_of_bounds(e)
    if bounds is not None:  # the interpreter's bound check (tritoncompat), wrapped by Triton
        return Refusal(
            "runtime_error",
            f"a kernel accessed memory outside the tensors it was given while {what}: {bounds}. "
            "Mask every load and store to the tensor's extent.",
            "out-of-bounds",
        )
    if _is_compile_error(e):
        return Refusal("compile_error", f"Triton compilation failed while {what}:\n{text}")
    lower = str(e).lower()
    if isinstance(e, (getattr(torch.cuda, "OutOfMemoryError", MemoryError), MemoryError)) or (
        isinstance(e, RuntimeError) and ("out of memory" in lower or "can't allocate" in lower)
    ):
        return Refusal("runtime_error", f"out of memory while {what}:\n{text}", "memory")
    fault = cuda and any(
        s in lower
        for s in (
            "cuda error",
            "illegal memory access",
            "misaligned address",
            "device-side assert",
            "unspecified launch failure",
        )
    )
    return Refusal(
        "runtime_error",
        f"{type(e).__name__} while {what}:\n{text}",
        "cuda-fault" if fault else None,
    )


def _out_of_bounds(e: BaseException) -> str | None:
    """The message of an interpreter bound-check failure anywhere in e's chain, or None."""
    from .tritoncompat import OutOfBounds

    seen: set[int] = set()
    err: BaseException | None = e
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OutOfBounds):
            return str(err)[:500]
        err = err.__cause__ or err.__context__
    return None


def _candidate_traceback(e: BaseException, path: str) -> str:
    """The exception with the candidate's own frames (file line numbers and source lines)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
    lines = [f"  candidate.py line {f.lineno}, in {f.name}: {f.line}" for f in frames[-6:]]
    message = "".join(traceback.format_exception_only(type(e), e)).strip()
    if len(message) > 2500:
        message = message[:2000] + "\n...\n" + message[-400:]
    return "\n".join([*lines, message])


def _is_compile_error(e: BaseException) -> bool:
    """Triton rejected the kernel's source (on a GPU at compile time; under the interpreter, a
    language error raised from triton/language, which InterpreterError wraps)."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & {
        "CompilationError",
        "CompileTimeAssertionFailure",
        "OutOfResources",
        "PTXASError",
        "UnsupportedLanguageConstruct",
    }:
        return True
    language = f"{os.sep}triton{os.sep}language{os.sep}"
    for err in (e, e.__cause__):
        if err is None:
            continue
        tb = traceback.extract_tb(err.__traceback__)
        if any(language in f.filename for f in tb[-3:]):
            return True
        if isinstance(err, AttributeError) and "triton.language" in str(err):
            return True  # tl.foo: no such function
    return False
