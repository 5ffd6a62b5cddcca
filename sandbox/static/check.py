"""The static check: rules on a candidate's syntax tree before it runs (see rules.py)."""

from __future__ import annotations

import ast

from ..contract import ALLOWED_ROOTS, LIMITED_IMPORTS
from ..rules import Violation, _words, any, getattr, isinstance, len, repr, sorted
from .aliases import _Aliases, _const_str, _dotted, _is_builtin_call, _root_name
from .messages import _message
from .published import (
    AMP_DECORATORS,
    DOTTED_ALLOWED,
    amp_call_problems,
    amp_value_problem,
    autograd_function_classes,
    bound_names,
    ctx_store_class,
    exposed_function_classes,
    is_import_fallback,
    under,
)
from .pyparse import parse
from .sourcetext import encoding_problem

# -- static checks: the tables ---------------------------------------------------------------------


_ALLOWED_ROOTS = ALLOWED_ROOTS

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
    "allocator); remove it: the evaluator seeds and places the inputs, and a kernel needing "
    "random numbers takes a seed argument (tl.rand(seed, offsets))"
)
_FILE_MSG = (
    "reads or writes files or the network; a kernel computes from its inputs only: take "
    "weights from ModelNew's parameters (the evaluator copies Model's into them)"
)
_SUBSYSTEM_MSG = (
    "starts processes, threads or network traffic, or times code itself; a candidate is one "
    "module computing forward on the calling thread: remove it and launch your kernels from "
    "forward"
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

# __version__ (issue 20): a version string, read to pick an API (`triton.__version__ >= "3.2"`);
# Python gives the name no behaviour, so reading it reaches nothing another name would not.
_DUNDER_OK = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__version__"})

# Attributes (and a few names) that lead to frames, code, globals or class internals.
_INTROSPECTION = _words(
    "__globals__ __builtins__ __subclasses__ __dict__ __class__ __code__ __closure__ __bases__ "
    "__base__ __mro__ __func__ __self__ __wrapped__ __defaults__ __kwdefaults__ __getattribute__ "
    "__reduce__ __reduce_ex__ __traceback__ __loader__ __spec__ __objclass__ __import__ mro f_back "
    "f_globals f_locals f_builtins f_code f_trace f_lasti f_lineno gi_frame gi_code gi_yieldfrom "
    "cr_frame cr_code cr_await ag_frame ag_code tb_frame tb_next tb_lineno tb_lasti co_code "
    "co_consts co_names co_varnames co_filename co_freevars co_cellvars co_lnotab co_linetable "
    "cell_contents _forward_cls _backward_cls"
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
        self.bound_names = bound_names(tree)
        self.function_classes = autograd_function_classes(tree, aliases)
        self.exposed_classes = exposed_function_classes(tree, self.function_classes, self.parents)
        self.tensor_classes: set[str] = set()

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 1) or 1
        col = getattr(node, "col_offset", 0) or 0
        self.found.append(Violation(rule, line, col, message))

    # - names and attributes -

    def dotted_violation(self, name: str) -> tuple[str, str] | None:
        """The rule a resolved module path breaks, with the reason."""
        parts = name.split(".")
        root, rest = parts[0], parts[1:]
        if root in LIMITED_IMPORTS and rest and rest[0] not in LIMITED_IMPORTS[root][0]:
            return "import", f"is not allowed: {LIMITED_IMPORTS[root][1]}"
        if not any(under(name, ok) for ok in DOTTED_ALLOWED):
            for prefix, rule, why in _DOTTED_RULES:
                if under(name, prefix):
                    return rule, why
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
                    f"{part} at all, however it is reached: remove it"
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
        getattr_base = _is_builtin_call(parent, "getattr") and parent.args[:1] == [node]  # type: ignore[arg-type,union-attr]  # a Call when true
        return not getattr_base

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check_attr_name(node, node.attr)
        if node.attr in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", node.attr))
        if self.is_chain_top(node):
            self.report_dotted(node, self.aliases.origins(node))
            self.check_amp_value(node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _INTROSPECTION_NAMES:
            self.add("introspection", node, _message("introspection", node.id))
        elif node.id in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", node.id))
        elif isinstance(node.ctx, ast.Load):
            self.check_builtin_name(node)
            self.check_amp_value(node)
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
        if func & AMP_DECORATORS or (
            func & {"functools.partial"}
            and node.args
            and self.aliases.origins(node.args[0]) & AMP_DECORATORS
        ):
            self.check_amp_call(node)
        if _is_builtin_call(node, "type") and len(node.args) == 3:
            self.add("builtin", node, _message("builtin", "type(name, bases, dict)"))
        self.generic_visit(node)

    def check_amp_call(self, node: ast.Call) -> None:
        for message in amp_call_problems(node, self.aliases):
            self.add("precision-flag", node, message)

    def check_amp_value(self, node: ast.expr) -> None:
        message = amp_value_problem(node, self.aliases, self.parents)
        if message:
            self.add("precision-flag", node, message)

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
        # `from torch.amp import custom_fwd`: the names are what is allowed, not the module.
        only_allowed = all(
            any(under(f"{node.module}.{a.name}", ok) for ok in DOTTED_ALLOWED) for a in node.names
        )
        if not self.check_module(node, node.module, whole=not only_allowed):
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

    def check_module(self, node: ast.AST, module: str, whole: bool = True) -> bool:
        if module.split(".")[0] not in _ALLOWED_ROOTS:
            self.add("import", node, _message("import", module))
            return False
        found = self.dotted_violation(module) if whole else None
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
        if not is_import_fallback(node, self.parents.get(node), self.bound_names):
            self.add("try", node, _message("try", "try"))
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        """`global` of the file's own plain names is accepted (issue 20: a lazy cache,
        `_cache = None; def get(): global _cache; ...`). It adds no capability: module state
        across calls is already a module-level dict or an lru_cache away, and what such state
        could do wrong (a stale or drifting result) is caught by the judge, which checks every
        call's output on fresh inputs (trials, drift, reuse). `nonlocal` of a plain name is
        accepted too (issue 25: an honest helper's closure counter); it rebinds an enclosing
        function's local, less than a global does. Refused: either of a dunder (a module
        __getattr__ or __builtins__ bound from inside a function, where the module-level check
        does not see it; a closure's `__class__` cell) or of ModelNew or the task's names."""
        keyword = "global" if isinstance(node, ast.Global) else "nonlocal"
        if not any(
            _is_dunder(n) or n.startswith("__") or n in _REFERENCE_NAMES or n == "ModelNew"
            for n in node.names
        ):
            return
        self.add("global", node, _message("global", f"{keyword} {', '.join(node.names)}"))

    visit_Nonlocal = visit_Global

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        name = node.name
        if _is_dunder(name) and name not in _SPECIAL_OK and not self.is_helper_call(node):
            self.add("special-method", node, _message("special-method", name))
        if name in _REFERENCE_NAMES:
            self.add("reference", node, _message("reference", name))
        for arg in _all_args(node.args):
            if arg.arg in _REFERENCE_NAMES:
                self.add("reference", arg, _message("reference", arg.arg))
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def is_helper_call(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """`def __call__` in a helper class other than ModelNew (issue 20: a callable grid or op
        object). It runs only when candidate code calls the object, on the calling thread, like
        any method: the judge never calls a candidate object but the model (outputs must be
        plain tensors, checked in the candidate process and again by the judge). ModelNew's
        call stays nn.Module's, which the evaluator calls: write forward."""
        parent = self.parents.get(node)
        return (
            node.name == "__call__"
            and isinstance(parent, ast.ClassDef)
            and parent.name != "ModelNew"
        )

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

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
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
        function = ctx_store_class(target, self.parents, self.function_classes)
        if function is None:
            self.add("monkeypatch", target, _message("store-not-self", shown))
        elif function in self.exposed_classes:
            self.add("monkeypatch", target, _message("ctx-exposed", shown, cls=function))


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


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


# -- static checks: entry points -------------------------------------------------------------------


def static_check(source: str, filename: str = "candidate.py") -> list[Violation]:
    """Every static rule the candidate breaks, sorted by line; empty means it may run."""
    encoding = encoding_problem(source)
    if encoding is not None:  # the rest would be checked on text other than what Python reads
        return [Violation("encoding", encoding[0], 0, _message("encoding", encoding[1]))]
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
