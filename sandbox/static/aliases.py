"""The static check's alias tracking: which module paths each name of a candidate may hold."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from ..rules import getattr, isinstance, len

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
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):
            if kw_default is not None:
                self._add(arg.arg, self.origins(kw_default))
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
        if node.args and "functools.partial" in self.origins(node.func):
            return self.origins(node.args[0])  # a partial of a module function is that function
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return set(self.returns.get(name or "", ()))
