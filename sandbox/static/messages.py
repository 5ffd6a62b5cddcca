"""The static check's messages, one per kind: the construct, why it is refused, what to write
instead (a coder reads them and fixes its file in the next round)."""

from __future__ import annotations

from ..contract import ALLOWED_IMPORTS

_MESSAGES: dict[str, str] = {
    "syntax": "{what}; fix the syntax",
    "encoding": "{what}: a candidate is UTF-8 text, read as such by the checks and by the "
    "process that runs it. Remove the declaration (or write `# coding: utf-8`) and save the "
    "file as UTF-8 without a byte-order mark",
    "import": "`import {what}` is not allowed: a candidate may import only "
    + ", ".join(name for name in ALLOWED_IMPORTS if name != "__future__")
    + " (sandbox/contract.py). Remove it and compute with torch and your @triton.jit kernels",
    "import-relative": "relative import `from {what} import` is not allowed: a candidate is a "
    "single file; copy what you need into it and import only torch, triton and the allowed "
    "standard modules",
    "import-star": "`from {what} import *` hides which names are used: import them by name",
    "alias-overflow": "`{what}` is bound to too many different module attributes to follow; "
    "bind each module or function you use once, to its own name",
    "builtin": "`{what}` is not allowed in a candidate (dynamic code, files, interpreter state or "
    "process exit: a result comes from the evaluator, never from the candidate reporting "
    "success); remove it: call functions by name, take data from forward's inputs and "
    "ModelNew's parameters, and return the result from forward",
    "builtin-ref": "`{what}` used as a value hides which attribute is accessed; call it "
    "directly with a constant name, e.g. getattr(obj, 'name'), or write obj.name",
    "getattr-computed": "`{what}` with a computed attribute name hides what is accessed; write "
    "the attribute out (obj.name)",
    "getattr-private": "reading the private attribute `{what}` by name is not allowed; use the "
    "public API",
    "setattr": "`{what}` on anything but self (with a constant public name) is not allowed; "
    "write `self.name = value` in your own methods",
    "dunder": "`{what}` is a dunder attribute; only __init__ (as in super().__init__()), "
    "__name__, __qualname__, __doc__ and __version__ may be used. Call the public API instead "
    "(x + y, not x.__add__(y); len(x), not x.__len__())",
    "introspection": "`{what}` reaches frames, code objects, globals or class internals, a way "
    "into the evaluator's own state; remove it and use what you are given: the tensors' shape, "
    "stride, dtype and device, and your own attributes (isinstance for a type test)",
    "monkeypatch": "changing `{what}` patches a module (or a class or object reached from one) "
    "for the whole process, the evaluator's timer, synchronisation and comparisons included. "
    "Call the library as it is and keep your own state on self (self.name = value)",
    "store-not-self": "assigning `{what}` stores an attribute on an object that is not self or a "
    "class of this file; keep state on self (self.name = value), in local variables, or, in a "
    "torch.autograd.Function's @staticmethod forward/backward, on its ctx parameter "
    "(ctx.name = value)",
    "ctx-exposed": "assigning `{what}` on ctx is allowed only where autograd makes the ctx, but "
    "`{cls}` is used other than as `{cls}.apply(...)` (called directly, passed around, "
    "decorated), so its ctx may be anything the caller passes, a module included. Call it only "
    "as `{cls}.apply(...)`",
    "try": "a try statement hides failures: a failing kernel must fail visibly, and a fallback "
    "to torch is not a kernel. Remove the try/except and let errors propagate (the one try "
    "allowed chooses where a Triton name is imported from: module level, only triton imports, "
    "`except ImportError:`)",
    "reference": "`{what}` belongs to the task (the reference model and its inputs), which the "
    "evaluator supplies; don't define, import or call it. Implement ModelNew on its own",
    "model-new": "ModelNew must be `class ModelNew(nn.Module)`: nn.Module (or torch.nn.Module) "
    "its only base, no decorators, no metaclass (found: {what})",
    "model-new-missing": "no top-level `class ModelNew(nn.Module)`: define it, with Model's "
    "constructor arguments, and launch your @triton.jit kernel from its forward",
    "model-new-rebound": "`{what}` is defined more than once or reassigned; define "
    "`class ModelNew(nn.Module)` exactly once",
    "no-triton": "no top-level function decorated with @triton.jit: write the kernel in this "
    "file (optionally under @triton.autotune/@triton.heuristics) and launch it from "
    "ModelNew.forward",
    "global": "`{what}` rebinds a name outside its function that is not a plain name (a "
    "dunder, ModelNew or the task's names). Keep per-model "
    "state on self and compute every call from its inputs; a module-level cache may use "
    "`global` of a plain name (`global _cache`)",
    "special-method": "`{what}` changes how Python treats your objects (finalizers, attribute "
    "hooks, context managers that swallow errors, tensor dispatch) at moments the evaluator "
    "does not control; write ordinary methods and call them (a helper class other than "
    "ModelNew may define __call__; ModelNew defines forward)",
    "tensor-subclass": "`{what}` subclasses torch.Tensor (or nn.Parameter): such a tensor runs "
    "code when the evaluator inspects it. Return plain torch.Tensor objects",
}


def _message(kind: str, what: str, **more: str) -> str:
    return _MESSAGES[kind].format(what=what, **more)
