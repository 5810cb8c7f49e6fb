"""How one module's statements bind names, read with ast: defs, imports, assignments,
star imports and ``__all__``, and how a def's parameters read as a signature.

tools/wheel_api.py follows the bindings across a wheel's modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Scope:
    """One module's top-level statements, the names they bind and the modules they star-import."""

    module: str
    package: str
    body: list[ast.stmt]
    bindings: dict[str, tuple] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)


def collect(body: list[ast.stmt], scope: Scope, override: bool = True) -> None:
    """Bind what body's statements bind in scope; else/except branches never override."""
    for stmt in body:
        for name, binding in _bindings(stmt, scope):
            _bind(scope, name, binding, override)
        if isinstance(stmt, ast.If):
            collect(stmt.body, scope, override)
            collect(stmt.orelse, scope, False)
        elif isinstance(stmt, ast.Try):
            collect(stmt.body, scope, override)
            for handler in stmt.handlers:
                collect(handler.body, scope, False)
            collect(stmt.orelse, scope, override)
            collect(stmt.finalbody, scope, override)
        elif isinstance(stmt, ast.With):
            collect(stmt.body, scope, override)


def signatures(nodes: tuple[ast.AST, ...], bound: bool) -> list[str]:
    """Each overload's parameters as ``a,b=,/,c,*args,d=,**kw`` (``=``: has a default)."""
    found = []
    for node in nodes:
        drop = bound and not decorated(node, "staticmethod")
        text = _signature(node.args, drop_first=drop)  # type: ignore[attr-defined]
        if text not in found:
            found.append(text)
    return found


def _signature(args: ast.arguments, drop_first: bool) -> str:
    positional = [*args.posonlyargs, *args.args]
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    parts = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if drop_first and index == 0:
            continue
        parts.append(arg.arg + ("=" if default else ""))
        if args.posonlyargs and arg is args.posonlyargs[-1]:
            parts.append("/")
    if args.vararg:
        parts.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        parts.append(arg.arg + ("" if default is None else "="))
    if args.kwarg:
        parts.append("**" + args.kwarg.arg)
    if parts and parts[0] == "/":
        parts.pop(0)
    return ",".join(parts)


def dataclass_signature(node: ast.ClassDef) -> str:
    parts = []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            parts.append(stmt.target.id + ("=" if stmt.value is not None else ""))
    return ",".join(parts)


def _bindings(stmt: ast.stmt, scope: Scope) -> Iterator[tuple[str, tuple]]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield stmt.name, ("def", (stmt,))
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                yield alias.asname, ("module", alias.name)
            else:
                top = alias.name.split(".")[0]
                yield top, ("module", top)
    elif isinstance(stmt, ast.ImportFrom):
        source = _absolute(stmt, scope)
        for alias in stmt.names:
            if alias.name == "*":
                scope.stars.append(source)
            else:
                yield alias.asname or alias.name, ("from", source, alias.name)
    elif isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            if isinstance(target, ast.Name):
                yield target.id, ("expr", stmt.value)
            elif isinstance(target, ast.Tuple | ast.List):
                for elt in target.elts:
                    if isinstance(elt, ast.Name):
                        yield elt.id, ("expr", None)


def _bind(scope: Scope, name: str, binding: tuple, override: bool) -> None:
    previous = scope.bindings.get(name)
    if previous is not None and _overloads(previous, binding):
        scope.bindings[name] = ("def", (*previous[1], *binding[1]))
    elif override or previous is None:
        scope.bindings[name] = binding


def _overloads(previous: tuple, binding: tuple) -> bool:
    """Whether binding adds an overload (or the implementation after them) to previous."""
    if previous[0] != "def" or binding[0] != "def":
        return False
    nodes = (*previous[1], *binding[1])
    if any(isinstance(node, ast.ClassDef) for node in nodes):
        return False
    return decorated(previous[1][-1], "overload") or decorated(binding[1][0], "overload")


def _absolute(stmt: ast.ImportFrom, scope: Scope) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = scope.package.split(".")
    base = ".".join(parts[: len(parts) - stmt.level + 1])
    return f"{base}.{stmt.module}" if stmt.module else base


def decorator_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def decorated(node: ast.AST, name: str) -> bool:
    return any(decorator_name(d) == name for d in getattr(node, "decorator_list", ()))


def is_setter(node: ast.AST) -> bool:
    return any(
        isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter", "getter")
        for d in getattr(node, "decorator_list", ())
    )


def self_targets(node: ast.AST) -> Iterator[str]:
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    for target in targets:
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            yield target.attr


def assigned(stmt: ast.stmt) -> Iterator[str]:
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                yield target.id
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        yield stmt.target.id


class AllEvaluator:
    """``__all__`` from literal lists, +, +=, extend/append/remove and ``mod.__all__``."""

    def __init__(self, wheel: Any, scope: Scope) -> None:
        self.wheel, self.scope = wheel, scope
        self.value: list[str] | None = None
        self.known = True

    def run(self, body: list[ast.stmt]) -> list[str] | None:
        self._walk(body)
        return self.value if self.known else None

    def _walk(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self._statement(stmt)
            if isinstance(stmt, ast.If | ast.With | ast.Try):
                self._walk(stmt.body)
                self._walk(getattr(stmt, "orelse", []))
                self._walk(getattr(stmt, "finalbody", []))

    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and any(_is_all(t) for t in stmt.targets):
            self.value = self._eval(stmt.value)
        elif isinstance(stmt, ast.AugAssign) and _is_all(stmt.target):
            self.value = (self.value or []) + (self._eval(stmt.value) or [])
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and _is_all(stmt.value.func.value)
            and stmt.value.args
        ):
            method, arg = stmt.value.func.attr, stmt.value.args[0]
            current = self.value or []
            if method == "extend":
                self.value = current + (self._eval(arg) or [])
            elif method == "append" and _const_str(arg):
                self.value = [*current, arg.value]  # type: ignore[attr-defined]
            elif method == "remove" and _const_str(arg):
                self.value = [n for n in current if n != arg.value]  # type: ignore[attr-defined]
            else:
                self.known = False

    def _eval(self, node: ast.AST | None) -> list[str] | None:
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            if all(_const_str(e) for e in node.elts):
                return [e.value for e in node.elts]  # type: ignore[attr-defined]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._eval(node.left), self._eval(node.right)
            if left is not None and right is not None:
                return left + right
        elif isinstance(node, ast.Call) and node.args and _call_name(node) in _COPIES:
            return self._eval(node.args[0])
        elif isinstance(node, ast.Attribute) and node.attr == "__all__":
            target = self.wheel.resolve_expr(self.scope.module, node.value)
            if target is not None and target.kind == "module":
                declared = self.wheel.all_names(target.module)
                if declared is not None:
                    return list(declared)
        elif isinstance(node, ast.Name) and node.id == "__all__":
            return list(self.value or [])
        self.known = False
        return None


_COPIES = {"list", "tuple", "sorted", "set"}


def _call_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else ""


def _is_all(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "__all__"


def _const_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
