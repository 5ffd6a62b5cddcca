"""The anti-cheat rules: Violation, the rule tables (RULES, GUARD_RULES), format_violations.

Three layers check a candidate against them:
- `static.static_check(source)`: rules on the candidate's syntax tree (never regexes), one
  Violation per problem with the line, the rule and what to do instead; the pool refuses a
  candidate with any.
- `guard.Guard`: a `sys.addaudithook` sandbox in the worker. While candidate code runs
  (`active()`), or whenever candidate code is the one asking, it denies network, processes, files
  outside the sandbox, ctypes and frame introspection, and records what it denied.
- `integrity.integrity_snapshot()` / `integrity_diff()`: what a cheat would patch (timers, syncs,
  the comparisons, Triton's launch entry points) and the precision flags, compared before and
  after.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .contract import ALLOWED_IMPORTS


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule: where (1-based line, 0-based column), which rule, what to do instead."""

    rule: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"


# Static rules (EvalResult.rule of a "rejected" candidate; "syntax" gives "compile_error").
RULES: dict[str, str] = {
    "syntax": "the file does not parse",
    "encoding": "a coding declaration (PEP 263) naming anything but UTF-8, a byte-order mark, "
    "or text that is not valid UTF-8: the checks read the file as UTF-8, as the candidate "
    "process does",
    "import": f"an import outside the allowlist ({', '.join(ALLOWED_IMPORTS)}), a star or "
    "relative import, or a forbidden module or torch subsystem reached through another "
    "(torch.os, torch.multiprocessing, torch.distributed)",
    "builtin": "eval/exec/compile/open/__import__/globals/locals/vars/breakpoint/input/exit/quit/"
    "SystemExit/delattr, setattr other than on self, getattr with a computed or underscore name, "
    "type(name, bases, dict), and helpers that evaluate strings (typing.get_type_hints, "
    "functools.singledispatch)",
    "dunder": "a dunder attribute other than __init__, __name__, __qualname__, __doc__, "
    "__version__",
    "introspection": "frames, tracebacks, code objects, globals, __dict__, __class__, "
    "__subclasses__, __builtins__ and the like: routes into the evaluator's own state",
    "private": "a _private name reached from an imported module (torch._C, torch.ops._x, "
    "triton._C)",
    "monkeypatch": "assigning, deleting or setattr-ing an attribute of a module or of anything "
    "reached from one (torch.cuda.synchronize = f, torch.Tensor.add = f), an attribute store on "
    "anything but self, a class of the file or the ctx of a torch.autograd.Function's "
    "staticmethod, or a process-wide torch hook (torch.overrides, register_module_forward_hook)",
    "torch-compile": "torch.compile, torch._dynamo/_inductor, TorchScript, torch.fx/export/"
    "library, C++/CUDA extensions, jiterator, cudart, Triton's C build helpers: code generated "
    "outside the file's @triton.jit kernels",
    "stream": "CUDA streams, events and graphs (torch.cuda.synchronize is allowed)",
    "precision-flag": "torch.backends.*, TF32 and reduced-precision flags, matmul precision, "
    "default dtype, autocast, deterministic-algorithm switches (torch.amp.custom_fwd/custom_bwd "
    "as decorators are allowed, without a reduced cast_inputs)",
    "global-state": "process-wide state the evaluator relies on: RNG seeds and state, default "
    "device, GPU memory cap, allocator",
    "file-io": "torch.load/save/from_file, torch.hub and other file or network access",
    "try": "a try statement (a failing kernel must fail visibly; no fallback to torch), except a "
    "module-level `try: from triton... import x` / `except ImportError: from triton... import x`",
    "reference": "any use of the task's Model, get_inputs or get_init_inputs (names, strings, "
    "definitions)",
    "model-new": "no top-level `class ModelNew(nn.Module)` (exactly one, nn.Module its only "
    "base, no decorators or metaclass, the name never rebound)",
    "no-triton": "no top-level function decorated with @triton.jit",
    "global": "a global or nonlocal of a dunder, ModelNew or the task's names (either of "
    "a plain name, as a lazy cache or a closure's counter, is allowed)",
    "special-method": "a special method other than __init__, __repr__/__str__, __post_init__, "
    "comparison/container ones and a helper class's __call__ (__del__, __getattr__, __exit__, "
    "__torch_function__, ... run code at moments the evaluator does not control), or a metaclass",
    "tensor-subclass": "a subclass of torch.Tensor/nn.Parameter or Tensor.as_subclass (a lazy "
    "output runs code when the evaluator inspects it)",
}

# Rules the Guard records (EvalResult.rule of a "rejected" candidate, set by the worker).
GUARD_RULES: dict[str, str] = {
    "sandbox-net": "a socket was created, connected, bound or a name resolved",
    "sandbox-process": "a process was started, forked, signalled, or a resource limit changed",
    "sandbox-file": "a file was written outside the sandbox, or read outside the readable roots "
    "or from a secret-looking path (.env, .ssh/, /proc/<other pid>/, ...)",
    "sandbox-ctypes": "ctypes was used (raw memory and native calls bypass every other check)",
    "sandbox-introspection": "frames, the garbage collector, tracing or dynamic code were used "
    "to reach the evaluator's own state",
}
# (The Guard also records RULES' "monkeypatch" when candidate code reassigns an object's
# __class__, a class's __bases__ or a function's __code__/__defaults__.)


def _words(text: str) -> frozenset[str]:
    """A set of names written as one space-separated string (keeps long tables short)."""
    return frozenset(text.split())


def format_violations(violations: Iterable[Violation]) -> str:
    """One line per violation, for the coder: `line N: [rule] what is wrong and what to do`."""
    return "\n".join(str(v) for v in violations)


# Bound now, at import: a candidate that replaces builtins (an isinstance that always says yes)
# must not blind the code that is about to catch it. Same objects; the checks' modules import
# them from here, so the names are looked up in each of those modules, never in builtins.
if TYPE_CHECKING:  # the same objects: let the type checker narrow with them as with builtins
    from builtins import any, callable, getattr, hasattr, isinstance, len, repr, sorted, type, vars  # noqa: UP029
else:
    isinstance, getattr, hasattr, callable, vars, type, len, repr, any, sorted = (
        builtins.isinstance,
        builtins.getattr,
        builtins.hasattr,
        builtins.callable,
        builtins.vars,
        builtins.type,
        builtins.len,
        builtins.repr,
        builtins.any,
        builtins.sorted,
    )
