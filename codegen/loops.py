"""A forward that loops over a traced size (`for t in range(seq_len)` with seq_len from
x.size()): the loop's body is outlined into a step of its own, which the codegen traces and
fuses like any forward, and the candidate's forward keeps the loop in Python around a call of
the step.

torch.fx cannot trace such a loop (range() takes no Proxy), and unrolling it at the traced size
would bake that size into the candidate. The outlined step is a function of tensors only:
- what the body reads that was bound before the loop (the loop's state, like `hidden`, and
  whatever stays the same across iterations) becomes the step's parameters;
- an index by the loop variable (`x[t]`, `x[:, t]`) is taken in the Python loop and passed in;
- what the body binds that the next iteration or the code after the loop reads comes back,
  and so does each value appended to a list (`outputs.append(output)`).
The statements before and after the loop (sizes, the state's start, `torch.stack(outputs)`) are
copied into the candidate as the task writes them: they are bookkeeping, left to torch.

Refused (Unsupported, with the reason): a body that returns, breaks, stores state on self or
reads the loop variable other than as an index; a step whose state changes shape from one
iteration to the next; code around the loop that reads the task's module-level names.
"""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..sandbox.static.pyparse import compile_tree, parse
from .pyforward import ALLOWED_FREE, _fix_super, _loaded_names, _module_aliases, model_class
from .unsupported import Unsupported

STEP = "_loop_step"  # ModelNew's method for the body (pyforward.WRITTEN_METHODS)


@dataclass(frozen=True)
class Loop:
    """Model.forward split around its loop over a traced size."""

    lineno: int  # the `for` statement's line in the task file
    forward: ast.FunctionDef  # Model.forward as the task writes it
    at: int  # the loop's position in forward's body
    var: str  # the loop variable
    hoisted: tuple[tuple[str, ast.expr], ...]  # (name, `x[t]`): indexed in the Python loop
    inputs: tuple[str, ...]  # the step's parameters, in order
    carried: tuple[str, ...]  # what the body binds and returns (the loop's state first)
    appends: tuple[tuple[str, str], ...]  # (list, the step's output name) per append
    step: ast.FunctionDef  # def forward(self, *inputs): the body; return (*carried, *appended)


def find(source: str, lineno: int | None = None) -> Loop | None:
    """The top-level `for ... in range(...)` of Model.forward at `lineno` (the line that
    stopped the tracer; None: the first such loop), outlined; None when there is no such loop.
    Unsupported when the outliner refuses it. Other loops stay in the code around it."""
    cls = model_class(source)
    fwd = next(
        (s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "forward"), None
    )
    if fwd is None:
        return None
    loops = [
        i
        for i, s in enumerate(fwd.body)
        if isinstance(s, ast.For)
        and isinstance(s.iter, ast.Call)
        and isinstance(s.iter.func, ast.Name)
        and s.iter.func.id == "range"
        and (lineno is None or s.lineno == lineno)
    ]
    if not loops:
        return None
    at = loops[0]
    loop = fwd.body[at]
    assert isinstance(loop, ast.For)
    if not isinstance(loop.target, ast.Name) or loop.orelse:
        raise Unsupported(f"the loop at line {loop.lineno} is not `for NAME in range(...)`")
    var = loop.target.id
    for node in ast.walk(ast.Module(body=loop.body, type_ignores=[])):
        if isinstance(node, (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom)):
            raise Unsupported(
                f"the loop's body at line {node.lineno} leaves it early ({type(node).__name__})"
            )
        if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.Global, ast.Nonlocal, ast.ClassDef)):
            raise Unsupported(f"the loop's body defines or rebinds scopes (line {node.lineno})")
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            raise Unsupported(f"the loop's body stores state on an object (line {node.lineno})")
    before = fwd.body[:at]
    after = fwd.body[at + 1 :]
    params = [a.arg for a in fwd.args.args]
    bound_before = set(params[1:]) | _stored(before)

    body = copy.deepcopy(loop.body)
    lists = _list_names(before)
    body, appended = _appends(body, lists, var)
    body, hoisted = _hoist(body, var, bound_before, _stored(body) | _all_names(fwd))
    module = ast.Module(body=body, type_ignores=[])
    if any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(module)):
        raise Unsupported(
            f"the loop's body uses its variable {var!r} other than as an index (line {loop.lineno})"
        )
    free = _free(body)
    for name in lists:
        if name in free:
            raise Unsupported(f"the loop's body reads the list {name!r} it appends to")
    tree = parse(source)
    known = ALLOWED_FREE | set(dir(builtins)) | _module_level(tree)
    reads = [n for n in free if n not in known or n in bound_before]
    hoisted_names = [h for h, _ in hoisted]
    missing = [n for n in reads if n not in bound_before and n not in hoisted_names]
    if missing:
        raise Unsupported(f"the loop's body reads {missing[0]!r}, bound nowhere before the loop")
    later = _loads(after)
    carried = [n for n in _stored_in_order(body) if n in free or n in later]
    carried = [n for n in carried if n not in {o for _, o in appended}]
    outputs = carried + [o for _, o in appended]
    if not outputs:
        raise Unsupported(f"the loop at line {loop.lineno} computes nothing its forward reads")
    inputs = hoisted_names + [n for n in reads if n not in hoisted_names]
    around = [*before, ast.Expr(value=loop.iter), *after]  # range()'s arguments are copied too
    _check_around(around, set(params) | _stored(before) | _stored(after), tree, loop.lineno)
    ret = ast.Return(
        value=ast.Tuple(elts=[ast.Name(id=o, ctx=ast.Load()) for o in outputs], ctx=ast.Load())
    )
    ast.copy_location(ret, loop.body[-1])
    step = ast.FunctionDef(
        name="forward",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=a) for a in ["self", *inputs]],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[*body, ret],
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    ast.copy_location(step, loop)
    ast.fix_missing_locations(step)
    return Loop(
        lineno=loop.lineno,
        forward=fwd,
        at=at,
        var=var,
        hoisted=tuple(hoisted),
        inputs=tuple(inputs),
        carried=tuple(carried),
        appends=tuple(appended),
        step=step,
    )


def step_model(model: nn.Module, loop: Loop, path: str) -> nn.Module:
    """The model with its forward replaced by the loop's step: the same object's attributes
    (parameters, submodules, their names), so that the step's graph names them as Model does."""
    scope = type(model).forward.__globals__
    code = compile_tree(ast.Module(body=[loop.step], type_ignores=[]), path, dont_inherit=True)
    local: dict[str, Any] = {}
    exec(code, scope, local)
    cls = type(type(model).__name__, (type(model),), {"forward": local["forward"]})
    cls.__module__ = type(model).__module__
    cls.__qualname__ = type(model).__qualname__
    step = copy.copy(model)
    step.__class__ = cls
    return step


def step_inputs(model: nn.Module, loop: Loop, inputs: list[Any], path: str) -> list[Any]:
    """The step's arguments at the loop's first iteration: the statements before the loop run
    on the (meta) inputs, the loop variable at range()'s start."""
    fwd = loop.forward
    loop_stmt = fwd.body[loop.at]
    assert isinstance(loop_stmt, ast.For) and isinstance(loop_stmt.iter, ast.Call)
    args = loop_stmt.iter.args
    start = args[0] if len(args) > 1 else ast.Constant(value=0)
    first = ast.Assign(targets=[ast.Name(id=loop.var, ctx=ast.Store())], value=start)
    hoisted = dict(loop.hoisted)
    values = [
        copy.deepcopy(hoisted[n]) if n in hoisted else ast.Name(id=n, ctx=ast.Load())
        for n in loop.inputs
    ]
    ret = ast.Return(value=ast.List(elts=values, ctx=ast.Load()))
    entry = copy.deepcopy(fwd)
    entry.name = "_loop_entry"
    entry.decorator_list = []
    entry.body = [*entry.body[: loop.at], first, ret]
    tree = ast.fix_missing_locations(ast.Module(body=[entry], type_ignores=[]))
    local: dict[str, Any] = {}
    exec(compile_tree(tree, path, dont_inherit=True), type(model).forward.__globals__, local)
    try:
        with torch.device("meta"):
            got = local["_loop_entry"](model, *inputs)
    except Exception as e:
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise Unsupported(
            f"the code before the loop does not run on meta tensors ({first_line})"
        ) from e
    for name, value in zip(loop.inputs, got):
        if not isinstance(value, torch.Tensor):
            raise Unsupported(
                f"the loop's body reads {name!r}, a {type(value).__name__}: its step takes "
                "tensors only"
            )
    return got


def check_state(loop: Loop, inputs: list[Any], info: dict[str, Any]) -> None:
    """The loop's state comes out of the step as it went in (shape and dtype): else the
    candidate's step, written at the first iteration's shapes, would not serve the next."""
    by_name = dict(zip(loop.inputs, inputs))
    for name in loop.carried:
        if name in by_name:
            got, want = info.get(name), by_name[name]
            if got is not None and (tuple(got.shape), got.dtype) != (
                tuple(want.shape),
                want.dtype,
            ):
                raise Unsupported(
                    f"the loop's {name!r} changes from {tuple(want.shape)} to "
                    f"{tuple(got.shape)} in one iteration"
                )


def forward_lines(loop: Loop, source: str) -> list[str]:
    """ModelNew.forward: the task's forward with the loop's body replaced by the step's call."""
    fwd = copy.deepcopy(loop.forward)
    old = fwd.body[loop.at]
    assert isinstance(old, ast.For)
    body: list[ast.stmt] = [
        ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=copy.deepcopy(expr))
        for name, expr in loop.hoisted
    ]
    outs = [*loop.carried, *(o for _, o in loop.appends)]
    call = ast.Call(
        func=ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=STEP, ctx=ast.Load()),
        args=[ast.Name(id=n, ctx=ast.Load()) for n in loop.inputs],
        keywords=[],
    )
    targets = ast.Tuple(elts=[ast.Name(id=o, ctx=ast.Store()) for o in outs], ctx=ast.Store())
    body.append(ast.Assign(targets=[targets], value=call))
    for lst, out in loop.appends:
        append = ast.Attribute(
            value=ast.Name(id=lst, ctx=ast.Load()), attr="append", ctx=ast.Load()
        )
        body.append(
            ast.Expr(
                value=ast.Call(func=append, args=[ast.Name(id=out, ctx=ast.Load())], keywords=[])
            )
        )
    new = ast.For(target=old.target, iter=old.iter, body=body, orelse=[])
    fwd.body[loop.at] = new
    _unused_as_underscore(fwd)
    fwd.decorator_list = []
    # The docstring and the comments go (_fix_super drops the one, unparse the others).
    fwd = _fix_super(ast.fix_missing_locations(fwd), _module_aliases(parse(source)))
    text = ast.unparse(ast.fix_missing_locations(fwd))
    lines = text.splitlines()
    comment = f"# The task's loop; its body is the step's kernels ({STEP}), one call a turn."
    return ["    " + line for line in [lines[0], "    " + comment, *lines[1:]]]


def _unused_as_underscore(fwd: ast.FunctionDef) -> None:
    """An unpacked name the forward never reads (`seq_len, batch_size, _ = x.size()` once the
    body is the step's) written `_`, as a linter wants it."""
    read = _loads(fwd.body)
    for node in ast.walk(fwd):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple):
                    for e in target.elts:
                        if isinstance(e, ast.Name) and e.id not in read:
                            e.id = "_"


# -- the body's names --------------------------------------------------------------------------


def _stored(stmts: list[ast.stmt]) -> set[str]:
    return set(_stored_in_order(stmts))


def _stored_in_order(stmts: list[ast.stmt]) -> list[str]:
    names: list[str] = []
    for s in stmts:
        for n in ast.walk(s):
            stores = isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))
            if stores and n.id not in names:
                names.append(n.id)
    return names


def _loads(stmts: list[ast.stmt]) -> set[str]:
    return {name for s in stmts for name in _loaded_names(s)}


def _all_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        a.arg for a in ast.walk(node) if isinstance(a, ast.arg)
    }


def _free(stmts: list[ast.stmt]) -> list[str]:
    """Names the statements read before they bind them, in order of first read. A statement's
    reads come before its own stores (`hidden = f(hidden)` reads the earlier hidden)."""
    bound: set[str] = set()
    free: list[str] = []
    for s in stmts:
        for n in ast.walk(s):
            loads = isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            if loads and n.id not in bound and n.id not in free:
                free.append(n.id)
        bound |= _stored([s])
    return free


def _list_names(stmts: list[ast.stmt]) -> set[str]:
    """Names bound to an empty list before the loop (`outputs = []`)."""
    return {
        s.targets[0].id
        for s in stmts
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and isinstance(s.value, ast.List)
        and not s.value.elts
    }


def _appends(
    body: list[ast.stmt], lists: set[str], var: str
) -> tuple[list[ast.stmt], list[tuple[str, str]]]:
    """`L.append(value)` as `L_item = value`: the step returns the value, the loop appends it."""
    out: list[ast.stmt] = []
    appended: list[tuple[str, str]] = []
    taken = _all_names(ast.Module(body=body, type_ignores=[])) | lists | {var}
    for s in body:
        call = s.value if isinstance(s, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id in lists
            and len(call.args) == 1
            and not call.keywords
        ):
            name = _fresh(f"{call.func.value.id}_item", taken)
            taken.add(name)
            assign = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=call.args[0])
            out.append(ast.copy_location(assign, s))
            appended.append((call.func.value.id, name))
        else:
            out.append(s)
    return out, appended


def _hoist(
    body: list[ast.stmt], var: str, invariant: set[str], taken: set[str]
) -> tuple[list[ast.stmt], list[tuple[str, ast.expr]]]:
    """Each `a[... var ...]` of a name bound before the loop and not in it, as a parameter."""
    stored = _stored(body)
    hoisted: dict[str, tuple[str, ast.expr]] = {}
    taken = set(taken)

    class Hoister(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            names = {n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name)}
            if (
                var in names
                and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name)
                and node.value.id in invariant
                and node.value.id not in stored
                and not (names - {var}) & stored
            ):
                key = ast.dump(node)
                if key not in hoisted:
                    name = _fresh(f"{node.value.id}_{var}", taken)
                    taken.add(name)
                    hoisted[key] = (name, copy.deepcopy(node))
                return ast.copy_location(ast.Name(id=hoisted[key][0], ctx=ast.Load()), node)
            return self.generic_visit(node)

    new = [Hoister().visit(s) for s in body]
    return new, list(hoisted.values())


def _fresh(base: str, taken: set[str]) -> str:
    name, i = base, 2
    while name in taken:
        name, i = f"{base}{i}", i + 1
    return name


def _module_level(tree: ast.Module) -> set[str]:
    """The names the task's file binds at its top level (pyforward._module_names also takes
    those inside functions and branches)."""
    names: set[str] = set()
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(s.name)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in s.names}
        else:
            names |= _stored([s])
    return names


def _check_around(stmts: list[ast.stmt], local: set[str], tree: ast.Module, lineno: int) -> None:
    """The code before and after the loop, copied into the candidate, reads only forward's own
    names, torch's modules and the builtins."""
    aliases = set(_module_aliases(tree))
    allowed = local | ALLOWED_FREE | set(dir(builtins)) | aliases
    for name in sorted(_loads(stmts) - allowed):
        raise Unsupported(
            f"the code around the loop at line {lineno} reads the module-level name {name!r}"
        )
