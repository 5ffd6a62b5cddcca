"""Anti-cheat checks on candidates: AST rules before they run, an audit-hook sandbox while they do.

Three layers:
- `static_check(source)`: rules on the candidate's syntax tree (never regexes), one Violation per
  problem with the line, the rule and what to do instead; the pool refuses a candidate with any.
- `Guard`: a `sys.addaudithook` sandbox in the worker. While candidate code runs (`active()`), or
  whenever candidate code is the one asking, it denies network, processes, files outside the
  sandbox, ctypes and frame introspection, and records what it denied.
- `integrity_snapshot()` / `integrity_diff()`: what a cheat would patch (timers, syncs, the
  comparisons, Triton's launch entry points) and the precision flags, compared before and after.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import importlib
import os
import site
import sys
import sysconfig
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from .pyparse import parse


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
    "import": "an import outside the allowlist (torch, triton, triton.language, math, typing, "
    "functools, itertools, operator, dataclasses, collections, enum, numbers, __future__), a "
    "star or relative import, or a forbidden module or torch subsystem reached through another "
    "(torch.os, torch.multiprocessing, torch.distributed)",
    "builtin": "eval/exec/compile/open/__import__/globals/locals/vars/breakpoint/input/exit/quit/"
    "SystemExit/delattr, setattr other than on self, getattr with a computed or underscore name, "
    "type(name, bases, dict), and helpers that evaluate strings (typing.get_type_hints, "
    "functools.singledispatch)",
    "dunder": "a dunder attribute other than __init__, __name__, __qualname__, __doc__",
    "introspection": "frames, tracebacks, code objects, globals, __dict__, __class__, "
    "__subclasses__, __builtins__ and the like: routes into the evaluator's own state",
    "private": "a _private name reached from an imported module (torch._C, torch.ops._x, "
    "triton._C)",
    "monkeypatch": "assigning, deleting or setattr-ing an attribute of a module or of anything "
    "reached from one (torch.cuda.synchronize = f, torch.Tensor.add = f), an attribute store on "
    "anything but self or a class of the file, or a process-wide torch hook (torch.overrides, "
    "register_module_forward_hook)",
    "torch-compile": "torch.compile, torch._dynamo/_inductor, TorchScript, torch.fx/export/"
    "library, C++/CUDA extensions, jiterator, cudart, Triton's C build helpers: code generated "
    "outside the file's @triton.jit kernels",
    "stream": "CUDA streams, events and graphs (torch.cuda.synchronize is allowed)",
    "precision-flag": "torch.backends.*, TF32 and reduced-precision flags, matmul precision, "
    "default dtype, autocast, deterministic-algorithm switches",
    "global-state": "process-wide state the evaluator relies on: RNG seeds and state, default "
    "device, GPU memory cap, allocator",
    "file-io": "torch.load/save/from_file, torch.hub and other file or network access",
    "try": "a try statement (a failing kernel must fail visibly; no fallback to torch)",
    "reference": "any use of the task's Model, get_inputs or get_init_inputs (names, strings, "
    "definitions)",
    "model-new": "no top-level `class ModelNew(nn.Module)` (exactly one, nn.Module its only "
    "base, no decorators or metaclass, the name never rebound)",
    "no-triton": "no top-level function decorated with @triton.jit",
    "global": "a global or nonlocal statement (module state kept across calls)",
    "special-method": "a special method other than __init__, __repr__/__str__, __post_init__ "
    "and comparison/container ones (__del__, __getattr__, __call__, __exit__, "
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

# -- static checks: the tables ---------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    """A set of names written as one space-separated string (keeps long tables short)."""
    return frozenset(text.split())


_ALLOWED_ROOTS = _words(
    "torch triton math typing functools itertools operator dataclasses collections enum numbers "
    "__future__"
)

# Modules a candidate must not reach even as an attribute of an allowed one: torch/__init__.py
# does `import os, sys`, so `torch.os.system(...)` needs no import. (signal, random, select and
# trace are left out: torch.signal, torch.random, torch.select and torch.trace are torch's own.)
_FORBIDDEN_MODULES = _words(
    "os sys subprocess socket ctypes threading multiprocessing concurrent importlib inspect gc "
    "builtins time pathlib io pickle shutil tempfile weakref marshal posix pty resource mmap "
    "faulthandler traceback linecache tokenize sysconfig site runpy pkgutil urllib http asyncio "
    "selectors fcntl code codeop types atexit logging socketserver ssl glob zipfile tarfile "
    "sqlite3 shelve platform getpass pwd contextlib copyreg dis ast numpy"
)

_COMPILE_MSG = (
    "generates or loads code outside this file's @triton.jit kernels; write the computation "
    "as a Triton kernel (torch.compile is the baseline you are compared with, not a kernel)"
)
_PRECISION_MSG = (
    "changes numeric precision for the whole process (the reference runs in it too); keep fp32 "
    "math in fp32 (tl.dot(..., input_precision='ieee') for fp32 operands) and leave flags alone"
)
_GLOBAL_STATE_MSG = (
    "changes process-wide state the evaluator relies on (RNG, default device, memory cap, "
    "allocator); remove it, a kernel needs none of these"
)
_FILE_MSG = "reads or writes files or the network; a kernel computes from its inputs only"
_SUBSYSTEM_MSG = (
    "starts processes, threads or network traffic, or times code itself; a candidate is one "
    "module computing forward on the calling thread"
)
_HOOK_MSG = (
    "installs a process-wide hook or mode that changes how every torch call runs, the "
    "reference's included; keep your logic inside ModelNew.forward"
)
_EVAL_MSG = "evaluates strings as code (annotations); call the functions you need directly"
_STREAM_MSG = (
    "is a CUDA stream, event or graph API: work on a side stream or inside a graph escapes the "
    "timer. Launch on the current stream; torch.cuda.synchronize() is allowed"
)
_PRIVATE_MSG = (
    "is private to torch/triton; use the public API (private internals are where the "
    "evaluator's machinery is reached and patched)"
)
_TENSOR_SUBCLASS_MSG = (
    "makes a torch.Tensor subclass, which runs code when the evaluator inspects the output; "
    "return plain torch.Tensor objects"
)

# (dotted prefix, rule, why): the first match wins.
_DOTTED_RULES: tuple[tuple[str, str, str], ...] = (
    ("torch.compile", "torch-compile", _COMPILE_MSG),
    ("torch.compiler", "torch-compile", _COMPILE_MSG),
    ("torch._dynamo", "torch-compile", _COMPILE_MSG),
    ("torch._inductor", "torch-compile", _COMPILE_MSG),
    ("torch.jit", "torch-compile", _COMPILE_MSG),
    ("torch.fx", "torch-compile", _COMPILE_MSG),
    ("torch.export", "torch-compile", _COMPILE_MSG),
    ("torch.library", "torch-compile", _COMPILE_MSG),
    ("torch.utils.cpp_extension", "torch-compile", _COMPILE_MSG),
    ("torch.ops.load_library", "torch-compile", _COMPILE_MSG),
    ("torch.classes", "torch-compile", _COMPILE_MSG),
    ("torch.cuda.jiterator", "torch-compile", _COMPILE_MSG),
    ("torch.cuda.cudart", "torch-compile", _COMPILE_MSG),
    ("triton.runtime.build", "torch-compile", _COMPILE_MSG),
    ("triton.backends", "torch-compile", _COMPILE_MSG),
    ("triton.tools", "torch-compile", _COMPILE_MSG),
    ("torch.backends", "precision-flag", _PRECISION_MSG),
    ("torch.set_float32_matmul_precision", "precision-flag", _PRECISION_MSG),
    ("torch.set_default_dtype", "precision-flag", _PRECISION_MSG),
    ("torch.set_default_tensor_type", "precision-flag", _PRECISION_MSG),
    ("torch.use_deterministic_algorithms", "precision-flag", _PRECISION_MSG),
    ("torch.set_deterministic_debug_mode", "precision-flag", _PRECISION_MSG),
    ("torch.set_flush_denormal", "precision-flag", _PRECISION_MSG),
    ("torch.autocast", "precision-flag", _PRECISION_MSG),
    ("torch.set_autocast_enabled", "precision-flag", _PRECISION_MSG),
    ("torch.amp", "precision-flag", _PRECISION_MSG),
    ("torch.cuda.amp", "precision-flag", _PRECISION_MSG),
    ("torch.cpu.amp", "precision-flag", _PRECISION_MSG),
    ("torch.manual_seed", "global-state", _GLOBAL_STATE_MSG),
    ("torch.seed", "global-state", _GLOBAL_STATE_MSG),
    ("torch.set_rng_state", "global-state", _GLOBAL_STATE_MSG),
    ("torch.random", "global-state", _GLOBAL_STATE_MSG),
    ("torch.cuda.seed", "global-state", _GLOBAL_STATE_MSG),
    ("torch.cuda.seed_all", "global-state", _GLOBAL_STATE_MSG),
    ("torch.cuda.random", "global-state", _GLOBAL_STATE_MSG),
    ("torch.set_default_device", "global-state", _GLOBAL_STATE_MSG),
    ("torch.cuda.memory", "global-state", _GLOBAL_STATE_MSG),
    ("torch.cuda.CUDAPluggableAllocator", "global-state", _GLOBAL_STATE_MSG),
    ("torch.cuda.MemPool", "global-state", _GLOBAL_STATE_MSG),
    ("torch.cuda.use_mem_pool", "global-state", _GLOBAL_STATE_MSG),
    ("torch.overrides", "monkeypatch", _HOOK_MSG),
    ("torch.utils.hooks", "monkeypatch", _HOOK_MSG),
    ("torch.load", "file-io", _FILE_MSG),
    ("torch.save", "file-io", _FILE_MSG),
    ("torch.from_file", "file-io", _FILE_MSG),
    ("torch.serialization", "file-io", _FILE_MSG),
    ("torch.hub", "file-io", _FILE_MSG),
    ("torch.package", "file-io", _FILE_MSG),
    ("torch.onnx", "file-io", _FILE_MSG),
    ("torch.utils.tensorboard", "file-io", _FILE_MSG),
    ("torch.multiprocessing", "import", _SUBSYSTEM_MSG),
    ("torch.distributed", "import", _SUBSYSTEM_MSG),
    ("torch.utils.data", "import", _SUBSYSTEM_MSG),
    ("torch.utils.benchmark", "import", _SUBSYSTEM_MSG),
    ("torch.profiler", "import", _SUBSYSTEM_MSG),
    ("torch.autograd.profiler", "import", _SUBSYSTEM_MSG),
    ("typing.get_type_hints", "builtin", _EVAL_MSG),
    ("typing.ForwardRef", "builtin", _EVAL_MSG),
    ("functools.singledispatch", "builtin", _EVAL_MSG),
    ("functools.singledispatchmethod", "builtin", _EVAL_MSG),
)

# Names that are a CUDA stream, event or graph wherever they hang off torch or triton.
_STREAM_COMPONENTS = _words(
    "Stream stream streams ExternalStream StreamContext set_stream current_stream default_stream "
    "Event CUDAGraph graph graphs make_graphed_callables graph_pool_handle"
)

# Attribute names that are suspicious whatever object they are read from.
_ANY_ROOT_ATTRS: dict[str, tuple[str, str]] = {
    **{
        n: ("stream", _STREAM_MSG)
        for n in _words(
            "record_stream wait_stream wait_event ExternalStream CUDAGraph set_stream "
            "current_stream default_stream make_graphed_callables"
        )
    },
    **{
        n: ("precision-flag", _PRECISION_MSG)
        for n in _words(
            "allow_tf32 allow_fp16_reduced_precision_reduction "
            "allow_bf16_reduced_precision_reduction set_float32_matmul_precision set_default_dtype "
            "set_default_tensor_type use_deterministic_algorithms set_flush_denormal "
            "fp32_precision"
        )
    },
    **{
        n: ("global-state", _GLOBAL_STATE_MSG)
        for n in _words(
            "manual_seed manual_seed_all set_rng_state set_rng_state_all "
            "set_per_process_memory_fraction set_default_device change_current_allocator"
        )
    },
    "as_subclass": ("tensor-subclass", _TENSOR_SUBCLASS_MSG),
    "from_file": ("file-io", _FILE_MSG),
    "load_library": ("torch-compile", _COMPILE_MSG),
    "compile": ("torch-compile", _COMPILE_MSG),  # nn.Module.compile() is torch.compile
}

_BANNED_BUILTINS = _words(
    "eval exec compile open __import__ __build_class__ globals locals vars breakpoint input "
    "exit quit delattr help SystemExit KeyboardInterrupt"
)

_DUNDER_OK = frozenset({"__init__", "__name__", "__qualname__", "__doc__"})

# Attributes (and a few names) that lead to frames, code, globals or class internals.
_INTROSPECTION = _words(
    "__globals__ __builtins__ __subclasses__ __dict__ __class__ __code__ __closure__ __bases__ "
    "__base__ __mro__ __func__ __self__ __wrapped__ __defaults__ __kwdefaults__ __getattribute__ "
    "__reduce__ __reduce_ex__ __traceback__ __loader__ __spec__ __objclass__ __import__ mro f_back "
    "f_globals f_locals f_builtins f_code f_trace f_lasti f_lineno gi_frame gi_code gi_yieldfrom "
    "cr_frame cr_code cr_await ag_frame ag_code tb_frame tb_next tb_lineno tb_lasti co_code "
    "co_consts co_names co_varnames co_filename co_freevars co_cellvars co_lnotab co_linetable "
    "cell_contents"
)
_INTROSPECTION_NAMES = frozenset({"__builtins__", "__loader__", "__spec__"})

_REFERENCE_NAMES = frozenset({"Model", "get_inputs", "get_init_inputs"})

_SPECIAL_OK = _words(
    "__init__ __repr__ __str__ __post_init__ __len__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ "
    "__hash__ __iter__ __contains__ __getitem__"
)
# Dunder names a module or class body may bind without defining behaviour.
_DUNDER_DATA_OK = frozenset({"__all__", "__slots__", "__version__", "__doc__", "__author__"})

_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
_TENSOR_TYPES = frozenset(
    {"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"}
)
_JIT_DECORATORS = frozenset({"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"})

# -- static checks: alias tracking -----------------------------------------------------------------


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of attributes over a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _root_name(node: ast.AST) -> str | None:
    """The name at the bottom of an attribute/subscript/call chain (`self` in self.a[0].b)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_builtin_call(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


# No real module path is deeper than this; no honest name is bound to more module paths.
_MAX_ALIAS_DEPTH = 12
_MAX_ALIAS_ORIGINS = 64


class _Aliases:
    """Which module path each name (or `a.b` attribute path) may hold, across all scopes.

    Scope-insensitive on purpose: an alias made anywhere (a default argument, a comprehension, a
    class body, a walrus) counts everywhere, so renaming a module cannot hide it.
    """

    def __init__(self, tree: ast.Module):
        self.names: dict[str, set[str]] = {}
        self.returns: dict[str, set[str]] = {}
        self.overflow: dict[str, int] = {}  # names bound to too many module paths -> a line
        self._line = 1
        for _ in range(8):  # fixed point: a chain of n aliases needs n rounds; 8 is plenty
            before = self._size()
            for node in ast.walk(tree):
                self._line = getattr(node, "lineno", self._line)
                self._collect(node)
            if self._size() == before:
                break

    def _size(self) -> int:
        return sum(map(len, self.names.values())) + sum(map(len, self.returns.values()))

    def _add(self, key: str, origins: Iterable[str], table: dict | None = None) -> None:
        table = self.names if table is None else table
        # `x = x.attr` grows a chain each round, two such attributes grow them exponentially.
        origins = {o for o in origins if o.count(".") < _MAX_ALIAS_DEPTH}
        if not origins or key in self.overflow:
            return
        bucket = table.setdefault(key, set())
        bucket.update(origins)
        if len(bucket) > _MAX_ALIAS_ORIGINS:
            self.overflow[key] = self._line  # reported, so nothing can hide behind the cap

    def _collect(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    self._add(a.asname, {a.name})
                else:
                    root = a.name.split(".")[0]
                    self._add(root, {root})
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for a in node.names:
                if a.name != "*":
                    self._add(a.asname or a.name, {f"{node.module}.{a.name}"})
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self._bind(target, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value:
            self._bind(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            self._bind(node.target, node.iter)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, item.context_expr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            self._collect_function(node)
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            self._add(f"{node.name}.{target.id}", self.origins(stmt.value))

    def _collect_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        positional = args.posonlyargs + args.args
        for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
            self._add(arg.arg, self.origins(default))
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            if default is not None:
                self._add(arg.arg, self.origins(default))
        if isinstance(node, ast.Lambda):
            return
        for sub in ast.walk(node):
            if isinstance(sub, ast.Return) and sub.value is not None:
                self._add(node.name, self.origins(sub.value), self.returns)

    def _bind(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._bind(t, v)
            else:
                for t in target.elts:
                    self._bind(t, value)
            return
        if isinstance(target, ast.Starred):
            self._bind(target.value, value)
            return
        if isinstance(value, ast.Lambda) and isinstance(target, ast.Name):
            self._add(target.id, self.origins(value.body), self.returns)
            return
        key = _dotted(target)
        if key is not None:
            self._add(key, self.origins(value))

    def origins(self, node: ast.AST | None) -> set[str]:
        """The module paths `node` may evaluate to (or contain); empty if none."""
        if node is None:
            return set()
        if isinstance(node, ast.Name):
            return set(self.names.get(node.id, ()))
        if isinstance(node, ast.Attribute):
            direct = self.names.get(_dotted(node) or "", set())
            return {f"{o}.{node.attr}" for o in self.origins(node.value)} | direct
        if isinstance(node, ast.Call):
            return self._call_origins(node)
        if isinstance(node, (ast.Subscript, ast.Starred, ast.NamedExpr)):
            return self.origins(node.value)
        if isinstance(node, ast.IfExp):
            return self.origins(node.body) | self.origins(node.orelse)
        if isinstance(node, (ast.BoolOp, ast.Tuple, ast.List, ast.Set)):
            items = node.values if isinstance(node, ast.BoolOp) else node.elts
            return set().union(*(self.origins(v) for v in items))
        if isinstance(node, ast.Dict):
            return set().union(*(self.origins(v) for v in node.values))
        return set()

    def _call_origins(self, node: ast.Call) -> set[str]:
        if _is_builtin_call(node, "getattr") and len(node.args) >= 2:
            name = _const_str(node.args[1])
            base = self.origins(node.args[0])
            return {f"{o}.{name}" for o in base} if name else base
        if _is_builtin_call(node, "type") and len(node.args) == 1:
            return {"?type"} if not self.origins(node.args[0]) else self.origins(node.args[0])
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return set(self.returns.get(name or "", ()))


# -- static checks: the visitor --------------------------------------------------------------------


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, aliases: _Aliases):
        self.aliases = aliases
        self.found: list[Violation] = []
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.tensor_classes: set[str] = set()

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 1) or 1
        col = getattr(node, "col_offset", 0) or 0
        self.found.append(Violation(rule, line, col, message))

    # - names and attributes -

    def dotted_violation(self, name: str) -> tuple[str, str] | None:
        """The rule a resolved module path breaks, with the reason."""
        for prefix, rule, why in _DOTTED_RULES:
            if name == prefix or name.startswith(prefix + "."):
                return rule, why
        parts = name.split(".")
        root, rest = parts[0], parts[1:]
        if root in ("torch", "triton") and _STREAM_COMPONENTS.intersection(rest):
            return "stream", _STREAM_MSG
        for part in rest:
            if part.startswith("register_module_") and root == "torch":
                return "monkeypatch", _HOOK_MSG
            if part.startswith("_") and not _is_dunder(part):
                return "private", _PRIVATE_MSG
            if part in _FORBIDDEN_MODULES:
                return "import", (
                    f"reaches the module `{part}` through `{root}`; a candidate may not use "
                    f"{part} at all, however it is reached"
                )
        return None

    def report_dotted(self, node: ast.AST, origins: set[str]) -> None:
        for name in sorted(o for o in origins if not o.startswith("?")):
            found = self.dotted_violation(name)
            if found:
                self.add(found[0], node, f"`{name}` {found[1]}")
                return

    def check_attr_name(self, node: ast.AST, attr: str, how: str = "") -> None:
        """Rules on an attribute name wherever it is read from."""
        shown = how or f".{attr}"
        if attr in _INTROSPECTION:
            self.add("introspection", node, _message("introspection", shown))
        elif _is_dunder(attr) and attr not in _DUNDER_OK:
            self.add("dunder", node, _message("dunder", shown))
        elif attr in _ANY_ROOT_ATTRS:
            rule, why = _ANY_ROOT_ATTRS[attr]
            self.add(rule, node, f"`{shown}` {why}")

    def is_chain_top(self, node: ast.AST) -> bool:
        """True unless `node` is the inner part of a longer attribute/subscript/getattr chain."""
        parent = self.parents.get(node)
        if isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node:
            return False
        getattr_base = _is_builtin_call(parent, "getattr") and parent.args[:1] == [node]
        return not getattr_base

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check_attr_name(node, node.attr)
        if node.attr in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", node.attr))
        if self.is_chain_top(node):
            self.report_dotted(node, self.aliases.origins(node))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _INTROSPECTION_NAMES:
            self.add("introspection", node, _message("introspection", node.id))
        elif node.id in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", node.id))
        elif isinstance(node.ctx, ast.Load):
            self.check_builtin_name(node)
        elif (
            _is_dunder(node.id)
            and node.id not in _DUNDER_DATA_OK
            and self.is_module_or_class_level(node)
        ):  # `__del__ = ...` in a class body, `__getattr__ = ...` in the module
            self.add("special-method", node, _message("special-method", node.id))

    def is_module_or_class_level(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        while parent is not None and not isinstance(
            parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
        ):
            parent = self.parents.get(parent)
        return isinstance(parent, (ast.ClassDef, ast.Module))

    def check_builtin_name(self, node: ast.Name) -> None:
        name = node.id
        if name in _BANNED_BUILTINS:
            self.add("builtin", node, _message("builtin", name))
            return
        if name not in ("getattr", "setattr"):
            return
        call = self.parents.get(node)
        if not (isinstance(call, ast.Call) and call.func is node):
            self.add("builtin", node, _message("builtin-ref", name))
        elif name == "getattr":
            self.check_getattr(call)
        else:
            self.check_setattr(call)

    def check_getattr(self, call: ast.Call) -> None:
        attr = _const_str(call.args[1]) if len(call.args) >= 2 else None
        if attr is None:
            self.add("builtin", call, _message("getattr-computed", "getattr"))
        elif attr.startswith("_") and attr not in _DUNDER_OK:
            if attr in _INTROSPECTION or _is_dunder(attr):
                self.check_attr_name(call, attr, f"getattr(..., {attr!r})")
            else:
                self.add("builtin", call, _message("getattr-private", attr))
        else:
            self.check_attr_name(call, attr, f"getattr(..., {attr!r})")
            if self.is_chain_top(call):
                self.report_dotted(call, self.aliases.origins(call))

    def check_setattr(self, call: ast.Call) -> None:
        target = call.args[0] if call.args else None
        attr = _const_str(call.args[1]) if len(call.args) >= 2 else None
        if target is not None and self.aliases.origins(target):
            name = sorted(self.aliases.origins(target))[0]
            self.add("monkeypatch", call, _message("monkeypatch", f"{name}.{attr or '?'}"))
        elif not (isinstance(target, ast.Name) and target.id == "self" and attr and attr[0] != "_"):
            self.add("builtin", call, _message("setattr", "setattr"))

    def visit_Call(self, node: ast.Call) -> None:
        func = self.aliases.origins(node.func)
        if func & {"operator.attrgetter", "operator.methodcaller"}:
            self.check_attrgetter(node)
        if _is_builtin_call(node, "type") and len(node.args) == 3:
            self.add("builtin", node, _message("builtin", "type(name, bases, dict)"))
        self.generic_visit(node)

    def check_attrgetter(self, node: ast.Call) -> None:
        names = [_const_str(a) for a in node.args[:1]] if node.args else [None]
        for name in names:
            if name is None:
                self.add("builtin", node, _message("getattr-computed", "attrgetter/methodcaller"))
                continue
            for part in name.split("."):
                if part.startswith("_") and not (part in _INTROSPECTION or _is_dunder(part)):
                    self.add("builtin", node, _message("getattr-private", part))
                else:
                    self.check_attr_name(node, part, f"attrgetter({name!r})")

    # - statements -

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_module(node, alias.name)
            self.check_alias(node, alias)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.add("import", node, _message("import-relative", "." * node.level))
            return
        if not self.check_module(node, node.module):
            return
        for alias in node.names:
            if alias.name == "*":
                self.add("import", node, _message("import-star", node.module))
                continue
            self.check_alias(node, alias)
            name = f"{node.module}.{alias.name}"
            self.check_attr_name(node, alias.name, f"from {node.module} import {alias.name}")
            found = self.dotted_violation(name)
            if found:
                self.add(found[0], node, f"`{name}` {found[1]}")

    def check_module(self, node: ast.AST, module: str) -> bool:
        if module.split(".")[0] not in _ALLOWED_ROOTS:
            self.add("import", node, _message("import", module))
            return False
        found = self.dotted_violation(module)
        if found:
            self.add(found[0], node, f"`import {module}`: `{module}` {found[1]}")
            return False
        return True

    def check_alias(self, node: ast.AST, alias: ast.alias) -> None:
        for name in (alias.name.split(".")[-1], alias.asname):
            if name in _REFERENCE_NAMES:
                self.add("reference", node, _message("reference", name))
        if alias.asname and _is_dunder(alias.asname):
            self.add("introspection", node, _message("introspection", alias.asname))

    def visit_Try(self, node: ast.AST) -> None:
        self.add("try", node, _message("try", "try"))
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        keyword = "global" if isinstance(node, ast.Global) else "nonlocal"
        self.add("global", node, _message("global", f"{keyword} {', '.join(node.names)}"))

    visit_Nonlocal = visit_Global

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        name = node.name
        if _is_dunder(name) and name not in _SPECIAL_OK:
            self.add("special-method", node, _message("special-method", name))
        if name in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", name))
        for arg in _all_args(node.args):
            if arg.arg in _REFERENCE_NAMES:
                self.add("reference", arg, _message("reference", arg.arg))
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", node.name))
        for kw in node.keywords:
            if kw.arg == "metaclass":
                self.add("special-method", node, _message("special-method", "metaclass="))
        for base in node.bases:
            if self.aliases.origins(base) & _TENSOR_TYPES or (
                isinstance(base, ast.Name) and base.id in self.tensor_classes
            ):
                self.tensor_classes.add(node.name)
                self.add("tensor-subclass", node, _message("tensor-subclass", node.name))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if node.value in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", repr(node.value)))
        elif "{" in node.value and any(
            f"{sep}{name}" in node.value for name in _INTROSPECTION for sep in ".["
        ):
            self.add("introspection", node, _message("introspection", "a format string"))

    def visit_MatchClass(self, node: ast.AST) -> None:
        for attr in node.kwd_attrs:
            self.check_attr_name(node, attr, f"case ...({attr}=...)")
        self.generic_visit(node)

    # - stores: monkeypatching -

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.check_store(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign | ast.AnnAssign) -> None:
        self.check_store(node.target)
        self.generic_visit(node)

    visit_AnnAssign = visit_AugAssign

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.check_store(target)
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor | ast.comprehension) -> None:
        self.check_store(node.target)
        self.generic_visit(node)

    visit_AsyncFor = visit_comprehension = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self.check_store(item.optional_vars)
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def check_store(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.check_store(t)
        elif isinstance(target, ast.Starred):
            self.check_store(target.value)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            self.check_attribute_store(target)
        elif isinstance(target, ast.Name) and target.id == "ModelNew":
            self.add("model-new", target, _message("model-new-rebound", "ModelNew"))

    def check_attribute_store(self, target: ast.Attribute | ast.Subscript) -> None:
        origins = sorted(o for o in self.aliases.origins(target.value))
        shown = _dotted(target) or ast.unparse(target)
        if origins:
            known = [o for o in origins if not o.startswith("?")]  # "?type": type(x) of anything
            suffix = f".{target.attr}" if isinstance(target, ast.Attribute) else "[...]"
            where = known[0] + suffix if known else shown
            self.add("monkeypatch", target, _message("monkeypatch", where))
            return
        if isinstance(target, ast.Subscript):
            return  # item stores into the candidate's own containers
        root = _root_name(target.value)
        if root in ("self", "cls") or root in self.classes:
            return
        self.add("monkeypatch", target, _message("store-not-self", shown))


def _all_args(args: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return args.posonlyargs + args.args + args.kwonlyargs + extra


# -- static checks: top-level structure ------------------------------------------------------------


def _structure_violations(tree: ast.Module, aliases: _Aliases) -> list[Violation]:
    """model-new and no-triton: what the module must define at its top level."""
    found = []
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if not classes:
        found.append(Violation("model-new", 1, 0, _message("model-new-missing", "ModelNew")))
    for extra in classes[1:]:
        found.append(
            Violation(
                "model-new",
                extra.lineno,
                extra.col_offset,
                _message("model-new-rebound", "ModelNew"),
            )
        )
    if classes:
        cls = classes[0]
        bases = [aliases.origins(b) for b in cls.bases]
        good = len(bases) == 1 and bool(bases[0] & _MODULE_BASES) and not cls.keywords
        if not good or cls.decorator_list:
            shown = ", ".join(ast.unparse(b) for b in cls.bases) or "no base"
            found.append(
                Violation("model-new", cls.lineno, cls.col_offset, _message("model-new", shown))
            )
    if not any(_is_triton_kernel(n, aliases) for n in tree.body):
        found.append(Violation("no-triton", 1, 0, _message("no-triton", "")))
    return found


def _is_triton_kernel(node: ast.AST, aliases: _Aliases) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if aliases.origins(target) & _JIT_DECORATORS:
            return True
    return False


# -- static checks: messages -----------------------------------------------------------------------

_MESSAGES: dict[str, str] = {
    "syntax": "{what}; fix the syntax",
    "import": "`import {what}` is not allowed: a candidate may import only torch, triton "
    "(triton.language and its libdevice), math, typing, functools, itertools, operator, "
    "dataclasses, collections, enum and numbers. Remove it",
    "import-relative": "relative import `from {what} import` is not allowed: a candidate is a "
    "single file; import only torch, triton and the allowed standard modules",
    "import-star": "`from {what} import *` hides which names are used: import them by name",
    "alias-overflow": "`{what}` is bound to too many different module attributes to follow; "
    "bind each module or function you use once, to its own name",
    "builtin": "`{what}` is not allowed in a candidate (dynamic code, files, interpreter state or "
    "process exit: a result comes from the evaluator, never from the candidate reporting "
    "success); a kernel needs none of these, remove it",
    "builtin-ref": "`{what}` used as a value hides which attribute is accessed; call it "
    "directly with a constant name, e.g. getattr(obj, 'name'), or write obj.name",
    "getattr-computed": "`{what}` with a computed attribute name hides what is accessed; write "
    "the attribute out (obj.name)",
    "getattr-private": "reading the private attribute `{what}` by name is not allowed; use the "
    "public API",
    "setattr": "`{what}` on anything but self (with a constant public name) is not allowed; "
    "write `self.name = value` in your own methods",
    "dunder": "`{what}` is a dunder attribute; only __init__ (as in super().__init__()), "
    "__name__, __qualname__ and __doc__ may be used. Call the public API instead",
    "introspection": "`{what}` reaches frames, code objects, globals or class internals, a way "
    "into the evaluator's own state; remove it",
    "monkeypatch": "changing `{what}` patches a module (or a class or object reached from one) "
    "for the whole process, the evaluator's timer, synchronisation and comparisons included. "
    "Keep your own state on self",
    "store-not-self": "assigning `{what}` stores an attribute on an object that is not self or a "
    "class of this file; keep state on self (self.name = value) or in local variables",
    "try": "a try statement hides failures: a failing kernel must fail visibly, and a fallback "
    "to torch is not a kernel. Remove the try/except and let errors propagate",
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
    "global": "`{what}` keeps module state across calls: a result that is right for the checked "
    "calls and wrong later is how stateful-drift cheats work. Keep per-model state on self and "
    "compute every call from its inputs",
    "special-method": "`{what}` changes how Python treats your objects (finalizers, attribute "
    "hooks, calls, context managers that swallow errors, tensor dispatch); a candidate needs "
    "only __init__, forward and ordinary methods",
    "tensor-subclass": "`{what}` subclasses torch.Tensor (or nn.Parameter): such a tensor runs "
    "code when the evaluator inspects it. Return plain torch.Tensor objects",
}


def _message(kind: str, what: str) -> str:
    return _MESSAGES[kind].format(what=what)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


# -- static checks: entry points -------------------------------------------------------------------


def static_check(source: str, filename: str = "candidate.py") -> list[Violation]:
    """Every static rule the candidate breaks, sorted by line; empty means it may run."""
    try:
        tree = parse(source, filename=filename)
    except SyntaxError as e:
        return [Violation("syntax", e.lineno or 1, max((e.offset or 1) - 1, 0), _syntax_text(e))]
    except ValueError as e:  # null bytes in the source
        return [Violation("syntax", 1, 0, _message("syntax", str(e)))]
    except (RecursionError, MemoryError):  # thousands of nested expressions
        return [Violation("syntax", 1, 0, _message("syntax", "the code is nested too deeply"))]
    try:
        aliases = _Aliases(tree)
        checker = _Checker(tree, aliases)
        checker.visit(tree)
        found = checker.found + _structure_violations(tree, aliases)
    except RecursionError:  # expressions nested thousands deep: nobody writes a kernel so
        return [Violation("syntax", 1, 0, _message("syntax", "the code is nested too deeply"))]
    for name, line in aliases.overflow.items():
        found.append(Violation("import", line, 0, _message("alias-overflow", name)))
    unique: dict[tuple[str, int, int], Violation] = {}
    for v in found:
        unique.setdefault((v.rule, v.line, v.col), v)
    return sorted(unique.values(), key=lambda v: (v.line, _PRIORITY.get(v.rule, 9), v.col, v.rule))


# Where two rules fire on the same expression, the more specific one is reported first:
# `torch.backends.cuda.matmul.allow_tf32 = True` is a precision flag before it is a store.
# `class ModelNew(Model)` is a use of the reference before it is a malformed ModelNew.
_PRIORITY = {"precision-flag": 0, "monkeypatch": 1, "reference": 2}


def _syntax_text(e: SyntaxError) -> str:
    line = (e.text or "").strip()
    shown = f"{e.msg}: `{line}`" if line else e.msg
    return _message("syntax", shown)


def format_violations(violations: Iterable[Violation]) -> str:
    """One line per violation, for the coder: `line N: [rule] what is wrong and what to do`."""
    return "\n".join(str(v) for v in violations)


# == runtime: the audit-hook guard ================================================================

# Bound now, at import: a candidate that replaces builtins (an isinstance that always says yes)
# must not blind the code that is about to catch it. Same objects, looked up in this module.
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

# Executables Triton itself runs on a GPU machine: ptxas/cuobjdump/nvdisasm for the cubin and its
# statistics, a C compiler for its launcher module, ldconfig to find libcuda.
COMPILER_TOOLS = _words(
    "ptxas ptxas-blackwell cuobjdump nvdisasm gcc cc clang ld ldconfig ldconfig.real"
)

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_SECRET_DIRS = frozenset({".ssh", ".aws", ".config", ".gnupg", ".docker", ".kube", ".azure"})
_SECRET_FILES = frozenset(
    {".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", "credentials", ".bash_history"}
)
_SECRET_PREFIXES = (".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx")
# Stdlib helpers that hand frames to their caller: sys._getframe through them is introspection.
_FRAME_HELPERS = ("inspect.py", "traceback.py")
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_CODE_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__", "f_code", "gi_code"})
_PATCH_ATTRS = frozenset({"__class__", "__bases__", "__code__", "__defaults__", "__kwdefaults__"})
_MAX_RECORDED = 100  # a loop of denied calls must not fill memory with records

TRACE_ENV = "KERNELWRIGHT_GUARD_TRACE"

# Frame kinds: who wrote the code that asked for an event.
_STDLIB, _TRUSTED, _CANDIDATE = 0, 1, 2

_GUARD: Guard | None = None
_HOOK_INSTALLED = False


class _Active:
    """`with guard.active():` cheap enough to wrap every timed call."""

    __slots__ = ("_guard", "_previous")

    def __init__(self, guard: Guard):
        self._guard = guard

    def __enter__(self) -> None:
        self._previous = self._guard._active
        self._guard._active = True
        self._guard._armed = True

    def __exit__(self, *exc: object) -> None:
        self._guard._active = self._previous


class Guard:
    """An audit-hook sandbox for candidate code, installed once per worker process.

    Enforcement applies while `active()` (candidate import, construction, forward calls) and,
    at any time, to events asked for by candidate code itself: the first frame outside the
    standard library belongs to neither the standard library, site-packages nor this package
    (a thread or a finalizer the candidate left behind is caught when the guard is off).
    Denied events raise PermissionError in the candidate and are recorded in `violations`.
    """

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self._active = False
        self._armed = False  # candidate code has run in this process
        self._busy: set[int] = set()  # threads inside the hook: its own events pass
        self.writable_roots: tuple[str, ...] = ()
        self.readable_roots: tuple[str, ...] | None = None
        self.deny_paths: tuple[str, ...] = ()
        self._stdlib: tuple[str, ...] = ()
        self._trusted: tuple[str, ...] = ()
        self._kinds: dict[str, int] = {}
        self._homes: dict[str, bool] = {}  # file name -> under a writable root (candidate files)
        # KERNELWRIGHT_GUARD_TRACE=FILE: every denial appends the whole stack there, each frame
        # with the kind the guard gave it (to tell a false alarm's cause from its message alone).
        self.trace_path: str | None = None
        # Generated code ("<string>") by who had it exec'd, id -> code object; weak, so an entry
        # lives exactly as long as its code (an id is never reused while it is listed) and none
        # is ever evicted while it runs. See `_kind` and `_generated_for_candidate`.
        self._trusted_generated: weakref.WeakValueDictionary[int, Any] = (
            weakref.WeakValueDictionary()
        )
        self._candidate_generated: weakref.WeakValueDictionary[int, Any] = (
            weakref.WeakValueDictionary()
        )

    def install(
        self,
        writable_roots: Iterable[str],
        readable_roots: Iterable[str] | None = None,
        *,
        deny_paths: Iterable[str] = (),
        trusted_code: Iterable[str] = (),
    ) -> None:
        """Make this the process's guard (the hook itself is added once; it cannot be removed).

        writable_roots: where candidate-time code may create, write, rename or delete files.
        readable_roots: where it may read (None: anywhere); secret-looking paths never.
        deny_paths: files or directories never to be read or written.
        trusted_code: extra directories whose code counts as the evaluator's, not the candidate's.
        """
        global _GUARD, _HOOK_INSTALLED
        self.writable_roots = _real_roots(writable_roots)
        self.readable_roots = None if readable_roots is None else _real_roots(readable_roots)
        self.deny_paths = _real_roots(deny_paths)
        self._stdlib = _real_roots(_stdlib_dirs())
        trusted = _real_roots([*_trusted_dirs(), *trusted_code])
        environment = _environment_code((*self._stdlib, *trusted), self.writable_roots)
        self._trusted = _real_roots([*trusted, *environment])
        self._kinds.clear()
        self._homes.clear()
        self.trace_path = os.environ.get(TRACE_ENV) or None
        _GUARD = self
        if not _HOOK_INSTALLED:
            sys.addaudithook(_audit_hook)
            _HOOK_INSTALLED = True

    def active(self) -> _Active:
        """Context manager: enforce while candidate code runs."""
        return _Active(self)

    @property
    def is_active(self) -> bool:
        return self._active

    def reset(self) -> None:
        """Forget recorded violations (between candidates)."""
        self.violations.clear()

    # -- the hook's decisions ------------------------------------------------------------------

    def _kind(self, frame: Any) -> int:
        code = frame.f_code
        name = code.co_filename
        if _generated(name):
            # Generated source: the evaluator's own only if its side exec'd this very code
            # object (torch evaluates guard names like "L['self'].forward.__code__" so), else
            # the candidate's, whoever it asked to generate it.
            return _TRUSTED if self._generated_by(code) == "evaluator" else _CANDIDATE
        kind = self._kinds.get(name)
        if kind is None:
            kind = self._classify(name)
            self._kinds[name] = kind
        return kind

    def _classify(self, filename: str) -> int:
        """A file's kind (`_kind` decides generated code's)."""
        if filename.startswith("<frozen "):
            return _STDLIB
        path = os.path.realpath(filename)
        if _under(path, self._trusted):
            return _TRUSTED
        if _under(path, self._stdlib):
            return _STDLIB
        return _CANDIDATE

    def _requester(self, frame: Any) -> Any:
        """The first frame outside the standard library, walking out from the event."""
        while frame is not None and self._kind(frame) == _STDLIB:
            frame = frame.f_back
        return frame

    def _generated_by(self, code: Any) -> str:
        """Whose exec made generated `code`: "candidate" (by or for it), "evaluator", or "unseen"
        (exec'd before the guard was installed)."""
        if self._candidate_generated.get(id(code)) is code:
            return "candidate"
        if self._trusted_generated.get(id(code)) is code:
            return "evaluator"
        return "unseen"

    def _remember_generated(self, code: Any, *, trusted: bool) -> None:
        """`code` (and the functions it defines) was exec'd by the evaluator's side (`trusted`)
        or by or for the candidate."""
        stack = [code]
        while stack:
            code = stack.pop()
            if not trusted:  # the candidate's once, the candidate's for good
                self._trusted_generated.pop(id(code), None)
                self._candidate_generated[id(code)] = code
            elif self._generated_by(code) != "candidate":
                self._trusted_generated[id(code)] = code
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))

    def _generated_for_candidate(self, frame: Any) -> bool:
        """Whether code exec'd at `frame` is generated by or for the candidate.

        Walking out from the exec, the first frame that decides: candidate-written code (a file
        under a writable root, where the candidate's modules live, or code generated for it) makes
        it the candidate's; a module import (importlib's frames) makes it the imported module's
        own, library code even when the candidate's call set off the import (the methods of a
        dataclass in a module first imported during a candidate's call: taken for the
        candidate's, they made code generated under them later, by the evaluator's own calls,
        the candidate's too). With neither, it is the candidate's only while candidate
        code runs. So a finalizer the candidate left behind (its __del__ runs with the guard off)
        that has torch generate code (torch.fx) still gets the candidate's code, and so does code
        generated under code generated for it. Task files do not count: torch.compile of the
        reference runs through them.
        """
        while frame is not None:
            code = frame.f_code
            name = code.co_filename
            if name[:1] == "<":
                if name.startswith("<frozen importlib"):
                    return False
                if self._generated_by(code) == "candidate":
                    return True
            else:
                home = self._homes.get(name)
                if home is None:
                    home = _under(os.path.realpath(name), self.writable_roots)
                    self._homes[name] = home
                if home:
                    return True
            frame = frame.f_back
        return self._active

    def _by_candidate(self, frame: Any) -> bool:
        asker = self._requester(frame)
        return asker is not None and self._kind(asker) == _CANDIDATE

    def _candidate_line(self, frame: Any) -> int:
        while frame is not None:
            if self._kind(frame) == _CANDIDATE:
                return frame.f_lineno
            frame = frame.f_back
        return 0

    def _deny(self, rule: str, what: str, advice: str, frame: Any) -> PermissionError:
        line = self._candidate_line(frame)
        where = f" (candidate line {line})" if line else ""
        message = f"sandbox: the candidate tried to {what}{where}; {advice}"
        if len(self.violations) < _MAX_RECORDED:
            self.violations.append(Violation(rule, line, 0, message))
            if self.trace_path:
                self._trace(message, frame)
        return PermissionError(message)

    def _trace(self, message: str, frame: Any) -> None:
        """Append the denial and its stack, innermost first, to the trace file."""
        names = {_STDLIB: "stdlib", _TRUSTED: "trusted", _CANDIDATE: "candidate"}
        lines = [f"{message}  [guard {'on' if self._active else 'off'}]"]
        while frame is not None:
            code = frame.f_code
            kind = names[self._kind(frame)]
            if _generated(code.co_filename):
                by = self._generated_by(code)
                if by == "candidate":
                    kind += ", generated for the candidate"
                elif by == "unseen":
                    kind += ", generated before the guard or unseen"
            lines.append(f"  {code.co_filename}:{frame.f_lineno} {code.co_name} [{kind}]")
            frame = frame.f_back
        try:
            with open(self.trace_path, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n\n")
        except OSError:
            pass

    def _enforced(self, frame: Any) -> bool:
        return self._active or (self._armed and self._by_candidate(frame))

    # -- files ---------------------------------------------------------------------------------

    def _resolve(self, path: Any, dir_fd: Any = None) -> str | None:
        try:
            if isinstance(path, int):
                return os.readlink(f"/proc/self/fd/{path}")
            text = os.fsdecode(os.fspath(path))
            if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(text):
                text = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), text)
            return os.path.realpath(text)
        except (TypeError, ValueError, OSError):
            return None

    def _write_problem(self, path: Any, dir_fd: Any = None) -> str | None:
        real = self._resolve(path, dir_fd)
        if _open_channel(path, real):
            return None
        if real == os.devnull:
            return None  # subprocess's DEVNULL: Triton builds its launcher with cc's output there
        if real is None or not _under(real, self.writable_roots) or _under(real, self.deny_paths):
            return f"write to {real or path!r} outside its working directory"
        return None

    def _read_problem(self, path: Any, dir_fd: Any = None) -> str | None:
        real = self._resolve(path, dir_fd)
        if real is None:
            return None if isinstance(path, int) else f"read {path!r}"
        if _open_channel(path, real):
            return None
        given = os.fsdecode(path) if isinstance(path, (str, bytes)) else real
        if _looks_secret(real) or _looks_secret(given) or _under(real, self.deny_paths):
            return f"read {real!r}, which looks like credentials or another process's data"
        roots = self.readable_roots
        if roots is not None and not _under(real, roots) and not _under(real, self.writable_roots):
            return f"read {real!r} outside the readable directories"
        return None

    # -- processes -----------------------------------------------------------------------------

    def _is_compiler_tool(self, event: str, args: tuple) -> bool:
        if event == "subprocess.Popen":
            executable, argv = args[0], args[1]
            program = executable or (argv if isinstance(argv, (str, bytes)) else argv[0])
        else:  # os.posix_spawn(path, argv, env)
            program = args[0]
        name = os.path.basename(os.fsdecode(program))
        if name == "file":
            # platform.architecture() runs `file -b <this interpreter>`; Triton's launcher build
            # keys its cache on it (runtime/build.py). That exact call and no other.
            if event != "subprocess.Popen" or not _is_interpreter_probe(args[1]):
                return False
        elif name not in COMPILER_TOOLS:
            return False
        found = program if os.sep in os.fsdecode(program) else _which(name)
        real = self._resolve(found) if found else None
        # A "ptxas" the candidate wrote into its own directory is not Triton's ptxas.
        return real is not None and not _under(real, self.writable_roots)


def _is_interpreter_probe(argv: Any) -> bool:
    if isinstance(argv, (str, bytes)) or len(argv) != 3:
        return False
    _, flag, target = (os.fsdecode(a) for a in argv)
    try:
        same = os.path.realpath(target) == os.path.realpath(sys.executable)
    except (TypeError, ValueError, OSError):
        return False
    return flag == "-b" and same


# What /proc/self/fd/N names for a descriptor that is no file: a pipe, a socket, an eventfd.
_CHANNELS = ("pipe:[", "socket:[", "anon_inode:")


def _open_channel(path: Any, real: str | None) -> bool:
    """open(fd) of a pipe or socket the process already holds: no file is reached.

    subprocess wraps the pipes of the compiler tools it runs (ptxas) with open(fd); on the GPU
    every Triton compile does, and a rule on the name 'pipe:[N]' refused every kernel.
    """
    return isinstance(path, int) and real is not None and real.startswith(_CHANNELS)


def _which(name: str) -> str | None:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(d, name)
        if d and os.path.isfile(candidate):
            return candidate
    return None


def _real_roots(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({os.path.realpath(os.fsdecode(p)) for p in paths if p}))


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _looks_secret(path: str) -> bool:
    parts = path.split(os.sep)
    name = parts[-1]
    if _SECRET_DIRS.intersection(parts[:-1]) or name in _SECRET_FILES:
        return True
    if name.startswith(_SECRET_PREFIXES) or name.endswith(_SECRET_SUFFIXES):
        return True
    if len(parts) > 2 and parts[1] == "proc":
        pid = parts[2]
        if pid.isdigit() and int(pid) != os.getpid():
            return True  # another process: the parent's environment holds the API keys
        if pid in ("self", "thread-self", str(os.getpid())):
            return bool({"mem", "environ"}.intersection(parts[3:]))
    return False


def _stdlib_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return [paths.get("stdlib", ""), paths.get("platstdlib", ""), os.path.dirname(os.__file__)]


def _trusted_dirs() -> list[str]:
    """site-packages (torch, triton live there) and this package's own sandbox/ directory."""
    dirs = [os.path.dirname(os.path.abspath(__file__))]
    paths = sysconfig.get_paths()
    dirs += [paths.get("purelib", ""), paths.get("platlib", "")]
    with contextlib.suppress(AttributeError):
        dirs += site.getsitepackages()
    with contextlib.suppress(AttributeError):
        dirs.append(site.getusersitepackages())
    for name in ("torch", "triton", "numpy"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            dirs.append(os.path.dirname(os.path.dirname(file)))
    return dirs


def _environment_code(known: tuple[str, ...], writable: tuple[str, ...]) -> list[str]:
    """Code outside the `known` roots that was there before any candidate ran.

    A dependency installed with `pip install --target` or reached through PYTHONPATH is not in
    site-packages, yet torch imports it (typing_extensions calls sys._getframe): its frames are
    the evaluator's, not the candidate's. Trusted: import-path directories that hold installed
    distributions (`*.dist-info`: an install target, never a project or run directory), the
    directory of every top-level package already imported (its lazy submodules too) and the
    file of every other imported module. Never trusted: anything under a writable root or
    holding one, and this package's own tree (only its sandbox/ is, not the tests beside it).
    """
    own_root = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    places = {os.path.realpath(p) for p in sys.path if p and _holds_distributions(p)}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name == "__main__" or not isinstance(file, str) or not os.path.isabs(file):
            continue  # a relative __file__ (torch.ops has "_ops.py") names no place
        if "." not in name and getattr(module, "__path__", None) is not None:
            places.add(os.path.realpath(os.path.dirname(file)))  # a package: its directory
        else:
            places.add(os.path.realpath(file))
    found = []
    for place in sorted(places):
        if _under(place, known) or _under(place, (own_root, *writable)):
            continue
        if any(_under(inner, (place,)) for inner in (own_root, *writable)):
            continue
        found.append(place)
    return found


def _holds_distributions(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(e.name.endswith(".dist-info") and e.is_dir() for e in entries)
    except OSError:
        return False


# -- event handlers: (guard, event, args, frame) -> PermissionError to raise, or None -------------


def _on_net(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not g._enforced(frame):
        return None
    return g._deny(
        "sandbox-net",
        f"use the network ({event})",
        "a candidate has no network; compute from the inputs",
        frame,
    )


def _on_ctypes(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    # torch and triton internals may use ctypes while the guard is active; the candidate never.
    if not (g._armed and g._by_candidate(frame)):
        return None
    return g._deny(
        "sandbox-ctypes",
        f"use ctypes ({event})",
        "raw memory access and native calls are not allowed; write a Triton kernel",
        frame,
    )


def _on_process(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    candidate = g._armed and g._by_candidate(frame)
    if not (candidate or g._active):
        return None
    if (
        not candidate
        and event in ("subprocess.Popen", "os.posix_spawn")
        and g._is_compiler_tool(event, args)
    ):
        return None  # Triton running ptxas or cc for the candidate's kernel
    return g._deny(
        "sandbox-process",
        f"start, signal or limit a process ({event}{_shown(args)})",
        "a candidate runs in this process only: no subprocesses, forks, signals or rlimits",
        frame,
    )


def _on_open(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not g._enforced(frame):
        return None
    path, mode, flags = (*args, None, None, None)[:3]
    if isinstance(flags, int):
        writing = bool(flags & _WRITE_FLAGS)
    else:
        writing = any(c in str(mode or "") for c in "wax+")
    problem = g._write_problem(path) if writing else g._read_problem(path)
    return _file_denial(g, problem, frame)


def _on_file_write(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not g._enforced(frame):
        return None
    paths, dir_fds = _FILE_EVENT_PATHS[event](args)
    for path, dir_fd in zip(paths, dir_fds):
        problem = g._write_problem(path, dir_fd)
        if problem:
            return _file_denial(g, problem, frame)
    return None


def _on_file_read(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not args or not g._enforced(frame):
        return None
    return _file_denial(g, g._read_problem(args[0]), frame)


def _file_denial(g: Guard, problem: str | None, frame: Any) -> PermissionError | None:
    if problem is None:
        return None
    return g._deny(
        "sandbox-file",
        problem,
        "a candidate reads and writes no files; it returns its outputs as tensors",
        frame,
    )


def _paths(*positions: int, dir_fd: int | None = None) -> Callable[[tuple], tuple[list, list]]:
    """Which arguments of a file event are paths (and which argument is their dir_fd)."""

    def pick(args: tuple) -> tuple[list, list]:
        found = [args[i] for i in positions if i < len(args) and args[i] is not None]
        fd = args[dir_fd] if dir_fd is not None and dir_fd < len(args) else None
        return found, [fd] * len(found)

    return pick


_FILE_EVENT_PATHS: dict[str, Callable[[tuple], tuple[list, list]]] = {
    "os.remove": _paths(0, dir_fd=1),
    "os.rmdir": _paths(0, dir_fd=1),
    "os.mkdir": _paths(0, dir_fd=2),
    "os.chmod": _paths(0, dir_fd=2),
    "os.chown": _paths(0, dir_fd=3),
    "os.utime": _paths(0, dir_fd=3),
    "os.truncate": _paths(0),
    "os.chflags": _paths(0),
    "os.lchflags": _paths(0),
    "os.setxattr": _paths(0),
    "os.removexattr": _paths(0),
    "os.rename": _paths(0, 1, dir_fd=2),
    "os.link": _paths(0, 1, dir_fd=2),
    "os.symlink": _paths(0, 1, dir_fd=2),  # the link's target must lie inside the sandbox too
    "shutil.rmtree": _paths(0, dir_fd=1),
    "shutil.copyfile": _paths(1),
    "shutil.copymode": _paths(1),
    "shutil.copystat": _paths(1),
    "shutil.copytree": _paths(1),
    "shutil.move": _paths(0, 1),
    "shutil.chown": _paths(0),
    "shutil.make_archive": _paths(0),
    "shutil.unpack_archive": _paths(1),
    "tempfile.mkstemp": _paths(0),
    "tempfile.mkdtemp": _paths(0),
}


def _on_getframe(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if frame is None or not g._armed:
        return None
    direct = g._kind(frame) == _CANDIDATE
    helper = frame.f_code.co_filename.endswith(_FRAME_HELPERS) and g._by_candidate(frame)
    if not (direct or helper):
        return None  # namedtuple, typing, enum, torch and triton read their caller's module
    return _introspection(g, event, frame)


def _on_introspection(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not (g._armed and g._by_candidate(frame)):
        return None
    return _introspection(g, event, frame)


def _on_direct_introspection(
    g: Guard, event: str, args: tuple, frame: Any
) -> PermissionError | None:
    """compile/exec/marshal called by the candidate itself (not by an import it triggered)."""
    if frame is None or not g._armed or g._kind(frame) != _CANDIDATE:
        return None
    return _introspection(g, event, frame)


def _generated(filename: str) -> bool:
    """A code object's file name from exec'd source ("<string>", "<eval_with_key>.3"), not a
    frozen module's."""
    return filename[:1] == "<" and not filename.startswith("<frozen ")


def _on_exec(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    """exec/eval: remember whose generated code runs (`Guard._generated_for_candidate`); the
    candidate itself may not exec."""
    code = args[0] if args else None
    if isinstance(code, types.CodeType) and code.co_filename[:1] == "<":
        by_candidate = g._armed and frame is not None and g._generated_for_candidate(frame)
        g._remember_generated(code, trusted=not by_candidate)
    return _on_direct_introspection(g, event, args, frame)


def _on_getattr(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    name = args[1] if len(args) > 1 else None
    if frame is None or not g._armed or not isinstance(name, str):
        return None
    if name in _FRAME_ATTRS and g._by_candidate(frame):
        return _introspection(g, f"{event} {name}", frame)
    if name in _CODE_ATTRS and g._kind(frame) == _CANDIDATE:
        return _introspection(g, f"{event} {name}", frame)
    return None


def _on_setattr(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    name = args[1] if len(args) > 1 else None
    if name not in _PATCH_ATTRS or not (g._armed and g._by_candidate(frame)):
        return None
    return g._deny(
        "monkeypatch",
        f"reassign {name} of {type(args[0]).__name__} {_short(args[0])}",
        "classes, code and defaults of objects may not be swapped at run time",
        frame,
    )


def _introspection(g: Guard, what: str, frame: Any) -> PermissionError:
    return g._deny(
        "sandbox-introspection",
        f"inspect the interpreter ({what})",
        "frames, the garbage collector, tracing and dynamic code reach the evaluator's own "
        "state; compute from the inputs only",
        frame,
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _shown(args: tuple) -> str:
    shown = [a for a in args[:2] if a is not None and not isinstance(a, int)] or args[:1]
    return f": {_short(shown[-1])}" if shown else ""


_Handler = Callable[[Guard, str, tuple, Any], "PermissionError | None"]
_HANDLERS: dict[str, _Handler] = {
    "open": _on_open,
    **dict.fromkeys(_FILE_EVENT_PATHS, _on_file_write),
    **dict.fromkeys(("os.listdir", "os.scandir", "glob.glob"), _on_file_read),
    **dict.fromkeys(
        _words(
            "os.system os.exec os.posix_spawn os.spawn os.fork os.forkpty os.startfile os.kill "
            "os.killpg subprocess.Popen pty.spawn signal.pthread_kill resource.setrlimit "
            "resource.prlimit"
        ),
        _on_process,
    ),
    "sys._getframe": _on_getframe,
    **dict.fromkeys(
        _words(
            "sys._current_frames sys._current_exceptions sys.settrace sys.setprofile "
            "sys._settraceallthreads sys._setprofileallthreads sys.addaudithook "
            "sys.monitoring.register_callback gc.get_objects gc.get_referrers gc.get_referents "
            "code.__new__ function.__new__"
        ),
        _on_introspection,
    ),
    **dict.fromkeys(("compile", "marshal.loads", "marshal.load"), _on_direct_introspection),
    "exec": _on_exec,
    "object.__getattr__": _on_getattr,
    "object.__setattr__": _on_setattr,
    "object.__delattr__": _on_setattr,
}


_FALLBACK_RULES = {
    _on_net: "sandbox-net",
    _on_ctypes: "sandbox-ctypes",
    _on_process: "sandbox-process",
    _on_open: "sandbox-file",
    _on_file_write: "sandbox-file",
    _on_file_read: "sandbox-file",
}


def _fallback(guard: Guard, handler: _Handler, event: str) -> PermissionError | None:
    if not guard._active or handler in (_on_getattr, _on_getframe):
        return None  # those two fire inside torch/triton all the time: never fail closed there
    rule = _FALLBACK_RULES.get(handler, "sandbox-introspection")
    message = f"sandbox: the candidate's {event} event could not be judged, so it was refused"
    if len(guard.violations) < _MAX_RECORDED:
        guard.violations.append(Violation(rule, 0, 0, message))
    return PermissionError(message)


def _audit_hook(event: str, args: tuple) -> None:
    """Runs on every audit event of the process: return at once for anything not handled."""
    handler = _HANDLERS.get(event)
    if handler is None:
        if event[:7] == "socket.":
            handler = _on_net
        elif event[:7] == "ctypes.":
            handler = _on_ctypes
        else:
            return
    guard = _GUARD
    if guard is None:
        return
    ident = threading.get_ident()
    if ident in guard._busy:
        return  # the hook's own frame and path lookups raise events too
    guard._busy.add(ident)
    denial = None
    try:
        try:
            frame = sys._getframe(1)
        except ValueError:  # an event raised with no Python code on the stack
            frame = None
        denial = handler(guard, event, args, frame)
    except Exception:  # a judgement that failed: refuse while candidate code runs, else allow
        denial = _fallback(guard, handler, event)
    finally:
        frame = None
        guard._busy.discard(ident)
    if denial is not None:
        raise denial


# == runtime: integrity of what a cheat would patch ===============================================

_MODULES_TO_WATCH = (
    "torch",
    "torch.cuda",
    "torch.testing",
    "torch.nn",
    "torch.nn.functional",
    "triton",
    "triton.testing",
    "triton.runtime.jit",
    "triton.runtime.autotuner",
    "triton.runtime.interpreter",
    "triton.language",
    "time",
    "builtins",
    "math",
    "gc",
    "os",
    "sys",
    "copy",
    "json",
    "random",
    "threading",
)
_TENSOR_METHODS = _words(
    "__eq__ __ne__ __sub__ __getitem__ __setitem__ __bool__ __len__ __repr__ __torch_function__ "
    "__torch_dispatch__ __init_subclass__ sub abs max min isnan isinf isfinite clone copy_ "
    "data_ptr untyped_storage storage_offset stride size dim numel is_contiguous contiguous to "
    "double float cpu cuda eq ne all any sum item tolist equal allclose fill_ zero_ view reshape "
    "flatten detach element_size nbytes shape dtype device is_floating_point new_empty norm "
    "__class__"
)
_MODULE_METHODS = _words(
    "__call__ _call_impl _wrapped_call_impl __getattr__ __setattr__ to parameters named_parameters "
    "buffers named_buffers state_dict load_state_dict train eval"
)
_WATCHED: tuple[str, ...] = (
    *(
        f"torch.cuda.{n}"
        for n in _words(
            "synchronize current_stream default_stream stream set_stream Stream Event graph "
            "CUDAGraph empty_cache is_available memory_allocated max_memory_allocated "
            "reset_peak_memory_stats set_per_process_memory_fraction"
        )
    ),
    *(
        f"torch.cuda.Event.{n}"
        for n in ["__new__", "__init__", "record", "elapsed_time", "synchronize", "query", "wait"]
    ),
    *(f"torch.cuda.Stream.{n}" for n in ["__new__", "synchronize", "wait_stream", "wait_event"]),
    "torch.cuda.CUDAGraph.replay",
    *(
        f"time.{n}"
        for n in _words(
            "perf_counter perf_counter_ns time time_ns monotonic monotonic_ns process_time sleep"
        )
    ),
    *(
        f"torch.{n}"
        for n in _words(
            "allclose equal isclose isnan isinf isfinite abs max min sub eq ne all any where empty "
            "empty_like zeros zeros_like ones randn rand randint manual_seed no_grad clone norm "
            "Tensor Generator get_default_dtype set_default_dtype"
        )
    ),
    "torch.testing.assert_close",
    *(f"torch.Tensor.{n}" for n in _TENSOR_METHODS),
    *(f"torch.nn.Module.{n}" for n in _MODULE_METHODS),
    "torch.nn.functional.conv2d",
    "torch.nn.functional.linear",
    "triton.testing.do_bench",
    "triton.testing.do_bench_cudagraph",
    "triton.jit",
    "triton.runtime.jit.JITFunction.run",
    "triton.runtime.jit.JITFunction.__getitem__",
    "triton.runtime.jit.JITFunction.__call__",
    "triton.runtime.interpreter.InterpretedFunction.run",
    "triton.runtime.interpreter.InterpretedFunction.__call__",
    "triton.runtime.autotuner.Autotuner.run",
    "triton.runtime.autotuner.Heuristics.run",
    "triton.knobs.runtime.launch_enter_hook",
    "triton.knobs.runtime.launch_exit_hook",
    *(
        f"builtins.{n}"
        for n in _words(
            "print open isinstance issubclass type id len getattr setattr hasattr __import__ "
            "compile exec eval float int bool max min abs sum range zip any all sorted round super "
            "object repr str"
        )
    ),
    "math.isclose",
    "math.isfinite",
    "math.isnan",
    "gc.collect",
    "os._exit",
    "os.getpid",
    "sys.exit",
    "sys.addaudithook",
    "copy.deepcopy",
    "json.dumps",
    "json.loads",
    "random.SystemRandom",
    "threading.enumerate",
)

# The evaluator's own modules (some imported lazily by the worker): a patched `compare` or
# `same_bits` would pass anything, so they are watched like torch's.
_OWN_MODULES = ("checks", "compare", "task", "timing", "roofline", "launches", "results")
_MISSING = object()


def _static_attr(owner: Any, name: str) -> Any:
    """owner.name without running descriptors on classes, so the identity is stable."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            found = vars(klass).get(name, _MISSING)
            if found is not _MISSING:
                return found
        return _MISSING
    return getattr(owner, name, _MISSING)


def _lookup(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            value: Any = module
            for name in parts[cut:]:
                value = _static_attr(value, name)
                if value is _MISSING:
                    return _MISSING
            return value
    return _MISSING


def _flag_readers() -> dict[str, Callable[[], object]]:
    """Precision and numerics switches whose change is rule "precision-flag"."""
    import torch

    b = torch.backends
    readers: dict[str, Callable[[], object]] = {
        "torch.backends.cuda.matmul.allow_tf32": lambda: b.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": lambda: b.cudnn.allow_tf32,
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": (
            lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": (
            lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
        "torch.backends.cudnn.benchmark": lambda: b.cudnn.benchmark,
        "torch.backends.cudnn.deterministic": lambda: b.cudnn.deterministic,
        "torch.backends.cudnn.enabled": lambda: b.cudnn.enabled,
        "torch.get_default_dtype()": torch.get_default_dtype,
        "torch.are_deterministic_algorithms_enabled()": (
            torch.are_deterministic_algorithms_enabled
        ),
        "torch.backends.cuda.flash_sdp_enabled()": lambda: b.cuda.flash_sdp_enabled(),
        "torch.backends.cuda.mem_efficient_sdp_enabled()": lambda: (
            b.cuda.mem_efficient_sdp_enabled()
        ),
        "torch.backends.cuda.math_sdp_enabled()": lambda: b.cuda.math_sdp_enabled(),
        "torch.backends.cuda.preferred_blas_library()": lambda: b.cuda.preferred_blas_library(),
        # torch >= 2.9 spells TF32 this way too; absent attributes read as missing.
        "torch.backends.fp32_precision": lambda: getattr(b, "fp32_precision", None),
        "torch.backends.cuda.matmul.fp32_precision": (
            lambda: getattr(b.cuda.matmul, "fp32_precision", None)
        ),
        "torch.backends.cudnn.fp32_precision": lambda: getattr(b.cudnn, "fp32_precision", None),
        "torch.is_autocast_enabled('cuda')": lambda: torch.is_autocast_enabled("cuda"),
        "torch.is_autocast_enabled('cpu')": lambda: torch.is_autocast_enabled("cpu"),
        "torch.get_default_device()": lambda: str(torch.get_default_device()),
    }
    return readers


def _state_readers() -> dict[str, Callable[[], object]]:
    """Process-wide hooks and modes that would change how the reference runs ("monkeypatch")."""
    import torch
    import torch.nn.modules.module as module_mod

    readers: dict[str, Callable[[], object]] = {}
    for name in dir(module_mod):
        if name.startswith("_global_") and name.endswith("hooks"):
            readers[f"torch.nn.modules.module.{name}"] = lambda name=name: tuple(
                getattr(module_mod, name).values()
            )
    readers["torch function modes"] = lambda: torch._C._len_torch_function_stack()
    readers["torch dispatch modes"] = lambda: torch._C._len_torch_dispatch_stack()
    # A directory put first on the import path makes the evaluator's next import of a module
    # load a file from there (the worker drops its cwd, the candidate's home, at start).
    readers["sys.path"] = lambda: tuple(sys.path)
    readers["sys.gettrace()"] = sys.gettrace
    readers["sys.getprofile()"] = sys.getprofile
    readers["the sandbox guard"] = lambda: _GUARD
    return readers


def _read(reader: Callable[[], object]) -> object:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reading legacy TF32 flags warns on torch >= 2.9
            return reader()
    except Exception:  # an API this torch version lacks
        return _MISSING


_HERE = os.path.dirname(os.path.abspath(__file__))


def _own_modules() -> dict[str, Any]:
    """kernelwright.sandbox modules (and the worker run as __main__)."""
    found = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if name.startswith("kernelwright.sandbox") or (
            name == "__main__" and file.startswith(_HERE + os.sep)
        ):
            found[name] = module
    return found


def _own_functions() -> dict[str, object]:
    """Every callable at the top of the evaluator's modules, and the methods of their classes."""
    entries: dict[str, object] = {}
    for name, module in _own_modules().items():
        for attr, value in list(vars(module).items()):
            if not callable(value):
                continue
            entries[f"{name}.{attr}"] = value
            if isinstance(value, type) and value.__module__ == module.__name__:
                for k, v in vars(value).items():
                    if callable(v) or isinstance(v, (staticmethod, classmethod, property)):
                        entries[f"{name}.{attr}.{k}"] = v
    return entries


_SNAPSHOT_KEY = "the integrity snapshot itself"


def integrity_snapshot() -> dict[str, object]:
    """Identities of patchable functions and classes, and the values of precision/state flags.

    Imports the watched modules first, so that one a candidate imports later cannot arrive
    patched. Take it after the worker has wrapped what it wraps (launch counting). Never raises:
    if patched builtins break it half way, that failure is itself part of the snapshot.
    """
    snap: dict[str, object] = {_SNAPSHOT_KEY: "complete"}
    try:
        for name in (*_MODULES_TO_WATCH, *(f"{__package__}.{m}" for m in _OWN_MODULES)):
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        for path in _WATCHED:
            snap[path] = _lookup(path)
        for name in _MODULES_TO_WATCH:
            snap[f"sys.modules[{name!r}]"] = sys.modules.get(name, _MISSING)
        snap.update(_own_functions())
        for key, reader in {**_flag_readers(), **_state_readers()}.items():
            snap[key] = _read(reader)
    except Exception as e:  # builtins or the standard library patched under our feet
        snap[_SNAPSHOT_KEY] = f"failed ({type(e).__name__})"
    return snap


def integrity_restore(snapshot: dict[str, object]) -> list[str]:
    """Put back the watched functions and classes a candidate replaced; the keys restored.

    For the worker, after integrity_diff found a change: a patched builtin (isinstance, print)
    would otherwise break the evaluator's own reply. Flags and hooks are not restored (the worker
    is replaced after such a candidate anyway).
    """
    restored = []
    for path in (*_WATCHED, *(k for k in snapshot if k.startswith("kernelwright.sandbox"))):
        original = snapshot.get(path, _MISSING)
        if original is _MISSING or _lookup(path) is original:
            continue
        owner_path, _, name = path.rpartition(".")
        owner = _lookup(owner_path)
        if owner is _MISSING:
            continue
        with contextlib.suppress(Exception):
            inherited = isinstance(owner, type) and any(
                vars(base).get(name, _MISSING) is original for base in owner.__mro__[1:]
            )
            if inherited and name in vars(owner):
                delattr(owner, name)  # the candidate shadowed a base class's method
            else:
                setattr(owner, name, original)
            restored.append(path)
    return restored


_FLAG_KEYS_CACHE: set[str] = set()
_STATE_KEYS_CACHE: set[str] = set()


def integrity_diff(before: dict[str, object], after: dict[str, object]) -> list[tuple[str, str]]:
    """(rule, what changed) for each difference: "precision-flag" for flags, else "monkeypatch"."""
    if not _FLAG_KEYS_CACHE:
        _FLAG_KEYS_CACHE.update(_flag_readers())
        _STATE_KEYS_CACHE.update(_state_readers())
        _STATE_KEYS_CACHE.add(_SNAPSHOT_KEY)
    changes = []
    for key in sorted(set(before) | set(after), key=lambda k: (k not in _FLAG_KEYS_CACHE, k)):
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if key in _FLAG_KEYS_CACHE or key in _STATE_KEYS_CACHE:
            if _same_value(old, new):
                continue
            rule = "precision-flag" if key in _FLAG_KEYS_CACHE else "monkeypatch"
            changes.append(
                (rule, f"{key} ({_short(_shown_value(old))} -> {_short(_shown_value(new))})")
            )
        elif old is not new:
            if key not in before:
                continue  # a sandbox module first imported since the snapshot
            how = "deleted" if new is _MISSING else "replaced"
            changes.append(("monkeypatch", f"{key} ({how})"))
    return changes


def _same_value(a: object, b: object) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def _shown_value(value: object) -> object:
    return "missing" if value is _MISSING else value


def python_threads() -> set[int]:
    """Idents of every live Python thread (threading's and raw _thread ones)."""
    idents = {t.ident for t in threading.enumerate() if t.ident is not None}
    idents.update(sys._current_frames())
    return idents
