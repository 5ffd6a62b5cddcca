"""What the static check accepts of published Triton code (issue 20), and why each cannot cheat.

Liger-Kernel, FlagGems and the Triton tutorials were refused, though honest, for constructs that
the judge's isolation makes harmless: candidate code runs only in its own forked process under
bubblewrap and seccomp, which reaches neither the judge's objects nor files or the network, and
every output is checked by the judge. The static rules that remain are the ones a cheat needs;
each acceptance below is narrow, and its cheat is tested next to it (tests/test_static_published,
the zoo). The tables and checks here are used by check.py's visitor.
"""

from __future__ import annotations

import ast

from ..rules import _words, any, isinstance, len
from .aliases import _Aliases

# Module paths accepted although a broader prefix of check.py's _DOTTED_RULES refuses them. A
# match ends the prefix search; the part checks (private names, forbidden modules) still run.
DOTTED_ALLOWED = (
    # Host-side TMA descriptors: a dataclass holding a tensor, its shape, strides and block
    # shape, which the launcher turns into a descriptor. It generates no code; the rest of
    # triton.tools (compile, link, disasm: AOT C code) stays refused. Its round_f32_to_tf32
    # flag is kernel precision like tl.dot's default TF32: the comparison against the float64
    # reference judges it per the precision policy, as it does every in-kernel precision.
    "triton.tools.tensor_descriptor",
    # torch.amp's decorators for a torch.autograd.Function's forward/backward. Outside an
    # autocast region (the judge never enters one, a candidate may not: torch.autocast is
    # refused) they are no-ops: forward runs as written. Only `cast_inputs` could change
    # precision, inside autocast; a reduced one is refused (`amp_call_problems`), and
    # the decorators may only be called or used as decorators (`amp_value_problem`).
    "torch.amp.custom_fwd",
    "torch.amp.custom_bwd",
    "torch.amp.autocast_mode.custom_fwd",
    "torch.amp.autocast_mode.custom_bwd",
    "torch.cuda.amp.custom_fwd",
    "torch.cuda.amp.custom_bwd",
)
AMP_DECORATORS = frozenset(n for n in DOTTED_ALLOWED if n.startswith("torch."))
# cast_inputs values that never lower precision (None: the default, no cast).
AMP_CASTS_OK = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})
AMP_MSG = (
    "may only decorate a torch.autograd.Function's forward/backward, with at most device_type= "
    "and cast_inputs=torch.float32: cast_inputs=torch.float16/bfloat16 would run forward in "
    'reduced precision under autocast. Write `@torch.amp.custom_fwd(device_type="cuda")` and '
    "compute in the task's dtype"
)
AUTOGRAD_FUNCTION = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
# The staticmethods of a torch.autograd.Function whose first parameter is the ctx object.
CTX_METHODS = _words("forward backward setup_context jvp vjp")
IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def under(name: str, prefix: str) -> bool:
    """`name` is the module path `prefix` or something inside it."""
    return name == prefix or name.startswith(prefix + ".")


def amp_call_problems(node: ast.Call, aliases: _Aliases) -> list[str]:
    """torch.amp.custom_fwd(...) (or a functools.partial of it): no reduced cast_inputs."""
    found = []
    for kw in node.keywords:
        if kw.arg is None:  # **options could carry any cast_inputs
            found.append(f"`custom_fwd(**...)` {AMP_MSG}")
        elif kw.arg == "cast_inputs":
            value = kw.value
            none = isinstance(value, ast.Constant) and value.value is None
            casts = aliases.origins(value)
            if not none and not (casts and casts <= AMP_CASTS_OK):
                found.append(f"`cast_inputs={ast.unparse(value)}`: custom_fwd {AMP_MSG}")
    return found


def amp_value_problem(
    node: ast.expr, aliases: _Aliases, parents: dict[ast.AST, ast.AST]
) -> str | None:
    """The amp decorators only as decorators, called, or the function of a partial.

    Passed around as a value (to a helper, stored in a table) they could be called with any
    cast_inputs where no check sees the call.
    """
    if not aliases.origins(node) & AMP_DECORATORS:
        return None
    parent = parents.get(node)
    if isinstance(parent, ast.Call) and (
        parent.func is node
        or (parent.args[:1] == [node] and aliases.origins(parent.func) & {"functools.partial"})
    ):
        return None
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        d is node for d in parent.decorator_list
    ):
        return None
    return f"`{ast.unparse(node)}` {AMP_MSG}"


def is_import_fallback(node: ast.AST, parent: ast.AST | None, bound: set[str]) -> bool:
    """A module-level try that only chooses where a Triton name is imported from.

    `try: from triton.language.extra.libdevice import rsqrt` / `except ImportError: from
    triton.language.extra.cuda.libdevice import rsqrt` (issue 20: Triton moved libdevice
    between versions). Nothing but imports of triton modules runs in it, each checked as
    any import is, and it catches only ImportError/ModuleNotFoundError, names this file
    never rebinds: no kernel, launch or torch computation can fail into it, so it hides no
    failure and falls back to no torch code (a fallback importing torch stays refused).
    """
    if not (
        isinstance(node, ast.Try)
        and isinstance(parent, ast.Module)
        and node.handlers
        and not node.orelse
        and not node.finalbody
    ):
        return False
    statements = node.body + [s for h in node.handlers for s in h.body]
    for stmt in statements:
        if isinstance(stmt, ast.Import):
            modules = [a.name for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            modules = [stmt.module]
        else:
            return False
        if any(m.split(".")[0] != "triton" for m in modules):
            return False
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if handler.name is not None or not names:
            return False
        for name in names:
            if not (isinstance(name, ast.Name) and name.id in IMPORT_ERRORS):
                return False
            if name.id in bound:
                return False
    return True


def ctx_store_class(
    target: ast.Attribute, parents: dict[ast.AST, ast.AST], function_classes: set[str]
) -> str | None:
    """`ctx.name = value` on the ctx parameter of a torch.autograd.Function's staticmethod.

    PyTorch's documented way to hand non-tensor state from forward to backward (issue 20).
    The ctx object is made by autograd for this one call and belongs to it; an attribute
    on it patches nothing shared. Only a direct, public `ctx.name`, where ctx is the first
    parameter of forward/backward/setup_context/jvp/vjp, a @staticmethod of a class
    deriving from torch.autograd.Function, never rebound in that method; any module path
    ctx could hold has already been refused above (`origins`). And only where autograd is
    the one calling the method: called directly (`F.forward(torch.cuda, x)`) ctx would be
    whatever the caller passes, so a class referenced other than as `F.apply` (or a base),
    decorated, or whose body names its own methods is `exposed` and refused.
    Returns the Function class's name where the store is on such a ctx, else None.
    (Its way back from a ctx, `_forward_cls`, is refused as introspection. What is left,
    a patch of what the evaluator relies on, the candidate process's integrity snapshot
    catches at run time, as it does with the static checks off.)
    """
    if not isinstance(target.value, ast.Name) or target.attr.startswith("_"):
        return None
    func = parents.get(target)
    while func is not None and not isinstance(
        func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
    ):
        func = parents.get(func)
    if not isinstance(func, ast.FunctionDef) or func.name not in CTX_METHODS:
        return None
    params = func.args.posonlyargs + func.args.args
    ctx = target.value.id
    cls = parents.get(func)
    if isinstance(cls, ast.ClassDef) and func.name == "forward" and _defines(cls, "setup_context"):
        return None  # with setup_context, forward takes no ctx: its first parameter is an input
    if (
        params
        and params[0].arg == ctx
        and isinstance(cls, ast.ClassDef)
        and cls.name in function_classes
        and any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list)
        and not _rebinds(func, ctx)
    ):
        return cls.name
    return None


def _rebinds(func: ast.FunctionDef, name: str) -> bool:
    """`name` is assigned, deleted or shadowed anywhere inside `func` (its parameter aside)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.arg) and node.arg == name and node is not _first_param(func):
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return True
    return False


def _defines(cls: ast.ClassDef, name: str) -> bool:
    return any(isinstance(f, ast.FunctionDef) and f.name == name for f in cls.body)


def _first_param(func: ast.FunctionDef) -> ast.arg | None:
    params = func.args.posonlyargs + func.args.args
    return params[0] if params else None


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the file binds anywhere (assigned, defined, imported, a parameter)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def autograd_function_classes(tree: ast.AST, aliases: _Aliases) -> set[str]:
    """Classes of the file deriving from torch.autograd.Function, directly or through another."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    found: set[str] = set()
    for _ in range(len(classes)):
        before = len(found)
        for cls in classes:
            for base in cls.bases:
                if aliases.origins(base) & AUTOGRAD_FUNCTION or (
                    isinstance(base, ast.Name) and base.id in found
                ):
                    found.add(cls.name)
        if len(found) == before:
            break
    return found


def exposed_function_classes(
    tree: ast.AST, function_classes: set[str], parents: dict[ast.AST, ast.AST]
) -> set[str]:
    """The autograd Function classes whose methods candidate code could call directly.

    A reference other than `F.apply` or as a base class (`F.forward(...)`, `g = F`,
    getattr(F, ...), F()), a class decorator (it receives the class), or a name of one of its
    own methods read in its body (a staticmethod is callable there); with the bases of each.
    """
    exposed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in function_classes:
            parent = parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.attr == "apply":
                continue
            if isinstance(parent, ast.ClassDef) and node in parent.bases:
                continue
            exposed.add(node.id)
        elif isinstance(node, ast.ClassDef) and node.name in function_classes:
            if node.decorator_list:
                exposed.add(node.name)
            methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
            outside = [
                part
                for stmt in node.body
                for part in (
                    [*stmt.decorator_list, *stmt.args.defaults, *stmt.args.kw_defaults]
                    if isinstance(stmt, ast.FunctionDef)
                    else [stmt]
                )
                if part is not None
            ]
            if any(
                isinstance(n, ast.Name) and n.id in methods for p in outside for n in ast.walk(p)
            ):
                exposed.add(node.name)
    bases = {
        cls.name: {b.id for b in cls.bases if isinstance(b, ast.Name)}
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
    }
    todo = list(exposed)
    while todo:
        for base in bases.get(todo.pop(), set()) - exposed:
            exposed.add(base)
            todo.append(base)
    return exposed
