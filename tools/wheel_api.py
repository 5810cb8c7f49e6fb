"""What a wheel's public modules export, read from its Python sources without importing them.

A module's names come from its own definitions, its imports (``from .x import y``,
``import a.b as c``), its star imports (governed by the source's ``__all__``) and its
submodules; statements under ``if``/``try``/``with`` count, function bodies do not.
A compiled module counts through its ``.pyi`` stub when the wheel ships one, else
its names are unknown. Signatures keep parameter names, which have defaults, and
``*args``/``**kwargs``; types are dropped.
"""

from __future__ import annotations

import ast
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Builtin bases that add no constructor parameters or public members worth checking.
PLAIN_BASES = {"object", "Exception", "RuntimeError", "ValueError", "TypeError"}


@dataclass(frozen=True)
class Target:
    """What a name resolves to: kind is module, function, class, value or unknown."""

    kind: str
    module: str = ""
    qualname: str = ""
    nodes: tuple[ast.AST, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.module}:{self.qualname}"


UNKNOWN = Target("unknown")
VALUE = Target("value")


@dataclass
class Scope:
    """One module's top-level statements, the names they bind and the modules they star-import."""

    module: str
    package: str
    body: list[ast.stmt]
    bindings: dict[str, tuple] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)


class Wheel:
    """The Python modules of one wheel, parsed on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.files: dict[str, str] = {}
        self.packages: set[str] = set()
        self.compiled: set[str] = set()
        for name in self.zip.namelist():
            if ".dist-info/" in name or ".data/" in name:
                continue
            stem, _, ext = name.rpartition(".")
            if ext in ("py", "pyi"):
                module = stem.replace("/", ".")
                if module.endswith(".__init__"):
                    module = module[: -len(".__init__")]
                    self.packages.add(module)
                if ext == "py" or module not in self.files:
                    self.files[module] = name
            elif ext in ("so", "pyd"):
                self.compiled.add(name.split(".", 1)[0].replace("/", "."))
        self.tops = {module.split(".")[0] for module in self.files}
        self._scopes: dict[str, Scope | None] = {}
        self._alls: dict[str, list[str] | None] = {}

    def has_module(self, module: str) -> bool:
        return module in self.files or module in self.compiled

    def submodules(self, module: str) -> list[str]:
        prefix = module + "."
        found = {m for m in self.files if m.startswith(prefix) and "." not in m[len(prefix) :]}
        return sorted(found)

    def read(self, member: str) -> str:
        return self.zip.read(member).decode("utf-8", errors="replace")

    def scope(self, module: str) -> Scope | None:
        if module not in self._scopes:
            self._scopes[module] = self._parse(module)
        return self._scopes[module]

    def _parse(self, module: str) -> Scope | None:
        member = self.files.get(module)
        if member is None:
            return None
        try:
            tree = ast.parse(self.read(member), filename=member)
        except SyntaxError:
            return None
        package = module if module in self.packages else module.rpartition(".")[0]
        scope = Scope(module, package, tree.body)
        self._collect(tree.body, scope, override=True)
        return scope

    def all_names(self, module: str) -> list[str] | None:
        """The module's ``__all__`` when it can be read (None: undefined, or not a plain list)."""
        if module not in self._alls:
            self._alls[module] = None  # while evaluating: a cycle reads as unknown
            scope = self.scope(module)
            if scope is not None:
                self._alls[module] = _AllEvaluator(self, scope).run(scope.body)
        return self._alls[module]

    def _collect(self, body: list[ast.stmt], scope: Scope, override: bool) -> None:
        for stmt in body:
            for name, binding in _bindings(stmt, scope):
                _bind(scope, name, binding, override)
            if isinstance(stmt, ast.If):
                self._collect(stmt.body, scope, override)
                self._collect(stmt.orelse, scope, False)
            elif isinstance(stmt, ast.Try):
                self._collect(stmt.body, scope, override)
                for handler in stmt.handlers:
                    self._collect(handler.body, scope, False)
                self._collect(stmt.orelse, scope, override)
                self._collect(stmt.finalbody, scope, override)
            elif isinstance(stmt, ast.With):
                self._collect(stmt.body, scope, override)

    # -- resolution ---------------------------------------------------------------------

    def resolve(self, module: str, name: str, seen: frozenset = frozenset()) -> Target | None:
        """What ``module.name`` is; None when the module has no such name."""
        if (module, name) in seen:
            return UNKNOWN
        seen = seen | {(module, name)}
        scope = self.scope(module)
        if scope is None:
            if self.has_module(f"{module}.{name}"):
                return Target("module", f"{module}.{name}")
            return UNKNOWN if module in self.compiled else None
        binding = scope.bindings.get(name)
        if binding is not None:
            return self._follow(scope, name, binding, seen)
        for star in reversed(scope.stars):
            if name in self.exported(star) or (star in self.compiled and star not in self.files):
                found = self.resolve(star, name, seen) if star in self.files else UNKNOWN
                if found is not None:
                    return found
        if self.has_module(f"{module}.{name}"):
            return Target("module", f"{module}.{name}")
        return None

    def _follow(self, scope: Scope, name: str, binding: tuple, seen: frozenset) -> Target | None:
        kind = binding[0]
        if kind == "def":
            nodes = binding[1]
            is_class = isinstance(nodes[0], ast.ClassDef)
            return Target("class" if is_class else "function", scope.module, name, nodes)
        if kind == "module":
            return self._module_target(binding[1])
        if kind == "from":
            source, attr = binding[1], binding[2]
            if source.split(".")[0] not in self.tops:
                return UNKNOWN
            submodule = self.has_module(f"{source}.{attr}")
            if submodule and source == scope.module:  # `from pkg import sub` inside pkg
                return Target("module", f"{source}.{attr}")
            found = self.resolve(source, attr, seen)
            if (found is None or found.kind == "unknown") and submodule:
                return Target("module", f"{source}.{attr}")
            return found if found is not None else UNKNOWN
        node = binding[1]
        if isinstance(node, ast.Name | ast.Attribute):
            found = self.resolve_expr(scope.module, node, seen)
            return found if found is not None else UNKNOWN
        return VALUE

    def _module_target(self, module: str) -> Target:
        if module.split(".")[0] in self.tops and self.has_module(module):
            return Target("module", module)
        return UNKNOWN

    def resolve_expr(
        self, module: str, node: ast.AST, seen: frozenset = frozenset()
    ) -> Target | None:
        if isinstance(node, ast.Name):
            return self.resolve(module, node.id, seen)
        if isinstance(node, ast.Attribute):
            base = self.resolve_expr(module, node.value, seen)
            return None if base is None else self.attribute(base, node.attr, seen)
        return UNKNOWN

    def attribute(self, target: Target, attr: str, seen: frozenset = frozenset()) -> Target | None:
        if target.kind == "module":
            return self.resolve(target.module, attr, seen)
        if target.kind == "class":
            return self.member(target, attr, seen)
        return UNKNOWN

    def exported(self, module: str, seen: frozenset = frozenset()) -> set[str]:
        """The names ``from module import *`` brings: ``__all__``, else the public ones."""
        scope = self.scope(module)
        if scope is None or module in seen:
            return set()
        declared = self.all_names(module)
        if declared is not None:
            return set(declared)
        names = {n for n in scope.bindings if not n.startswith("_")}
        for star in scope.stars:
            names |= self.exported(star, seen | {module})
        return names

    def public_names(self, module: str) -> dict[str, Target]:
        """Every public attribute of module that resolves inside the wheel, by name."""
        scope = self.scope(module)
        names: set[str] = {m.rpartition(".")[2] for m in self.submodules(module)}
        if scope is not None:
            names |= set(scope.bindings)
            for star in scope.stars:
                names |= self.exported(star)
        found = {}
        for name in sorted(n for n in names if not n.startswith("_")):
            target = self.resolve(module, name)
            if target is not None and target.kind != "unknown":
                found[name] = target
        return found

    # -- classes ----------------------------------------------------------------------

    def bases(self, cls: Target) -> list[Target | None]:
        """The resolved base classes; None stands for a plain builtin base."""
        found: list[Target | None] = []
        for base in cls.nodes[0].bases:  # type: ignore[attr-defined]
            if isinstance(base, ast.Name) and base.id in PLAIN_BASES:
                found.append(None)
                continue
            if isinstance(base, ast.Subscript):  # Generic[T], Module[...]: the class itself
                base = base.value
            target = self.resolve_expr(cls.module, base)
            found.append(target if target is not None else UNKNOWN)
        return found

    def own_members(self, cls: Target) -> dict[str, tuple]:
        """The class body's methods, attributes and nested classes, plus self.x in methods."""
        node = cls.nodes[0]
        members: dict[str, tuple] = {}
        for stmt in node.body:  # type: ignore[attr-defined]
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                if _decorated(stmt, "property") or _is_setter(stmt):
                    members.setdefault(stmt.name, ("value",))
                    continue
                previous = members.get(stmt.name)
                overloads = previous[1] if previous and previous[0] == "method" else ()
                members[stmt.name] = ("method", (*overloads, stmt))
                for sub in ast.walk(stmt):
                    for target in _self_targets(sub):
                        members.setdefault(target, ("value",))
            elif isinstance(stmt, ast.ClassDef):
                members[stmt.name] = ("class", stmt)
            else:
                for name in _assigned(stmt):
                    members.setdefault(name, ("value",))
        return members

    def member(self, cls: Target, attr: str, seen: frozenset = frozenset()) -> Target | None:
        if (cls.key, attr) in seen:
            return UNKNOWN
        seen = seen | {(cls.key, attr)}
        found = self.own_members(cls).get(attr)
        if found is not None:
            if found[0] == "method":
                return Target("function", cls.module, f"{cls.qualname}.{attr}", found[1])
            if found[0] == "class":
                return Target("class", cls.module, f"{cls.qualname}.{attr}", (found[1],))
            return VALUE
        unknown = False
        for base in self.bases(cls):
            if base is None:
                continue
            if base.kind != "class":
                unknown = True
                continue
            hit = self.member(base, attr, seen)
            if hit is not None and hit.kind != "unknown":
                return hit
            unknown = unknown or hit is not None
        return UNKNOWN if unknown else None

    def constructor(self, cls: Target) -> list[str] | None:
        """The class's call signature(s): its own or inherited __init__ (else __new__)."""
        node = cls.nodes[0]
        if any(_decorator_name(d) == "dataclass" for d in node.decorator_list):  # type: ignore[attr-defined]
            return [_dataclass_signature(node)] if all(b is None for b in self.bases(cls)) else None
        for name in ("__init__", "__new__"):
            hit = self.member(cls, name)
            if hit is not None and hit.kind == "function":
                return signatures(hit.nodes, bound=True)
            if hit is not None:
                return None
        return [""]


def signatures(nodes: tuple[ast.AST, ...], bound: bool) -> list[str]:
    """Each overload's parameters as ``a,b=,/,c,*args,d=,**kw`` (``=``: has a default)."""
    found = []
    for node in nodes:
        drop = bound and not _decorated(node, "staticmethod")
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


def _dataclass_signature(node: ast.ClassDef) -> str:
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
    return _decorated(previous[1][-1], "overload") or _decorated(binding[1][0], "overload")


def _absolute(stmt: ast.ImportFrom, scope: Scope) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = scope.package.split(".")
    base = ".".join(parts[: len(parts) - stmt.level + 1])
    return f"{base}.{stmt.module}" if stmt.module else base


def _decorator_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _decorated(node: ast.AST, name: str) -> bool:
    return any(_decorator_name(d) == name for d in getattr(node, "decorator_list", ()))


def _is_setter(node: ast.AST) -> bool:
    return any(
        isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter", "getter")
        for d in getattr(node, "decorator_list", ())
    )


def _self_targets(node: ast.AST) -> Iterator[str]:
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


def _assigned(stmt: ast.stmt) -> Iterator[str]:
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                yield target.id
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        yield stmt.target.id


class _AllEvaluator:
    """``__all__`` from literal lists, +, +=, extend/append/remove and ``mod.__all__``."""

    def __init__(self, wheel: Wheel, scope: Scope) -> None:
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
