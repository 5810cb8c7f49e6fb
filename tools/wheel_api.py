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
from dataclasses import dataclass
from pathlib import Path

from module_ast import (
    AllEvaluator,
    Scope,
    assigned,
    collect,
    dataclass_signature,
    decorated,
    decorator_name,
    is_setter,
    self_targets,
    signatures,
)

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
        collect(tree.body, scope)
        return scope

    def all_names(self, module: str) -> list[str] | None:
        """The module's ``__all__`` when it can be read (None: undefined, or not a plain list)."""
        if module not in self._alls:
            self._alls[module] = None  # while evaluating: a cycle reads as unknown
            scope = self.scope(module)
            if scope is not None:
                self._alls[module] = AllEvaluator(self, scope).run(scope.body)
        return self._alls[module]

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
                if decorated(stmt, "property") or is_setter(stmt):
                    members.setdefault(stmt.name, ("value",))
                    continue
                previous = members.get(stmt.name)
                overloads = previous[1] if previous and previous[0] == "method" else ()
                members[stmt.name] = ("method", (*overloads, stmt))
                for sub in ast.walk(stmt):
                    for target in self_targets(sub):
                        members.setdefault(target, ("value",))
            elif isinstance(stmt, ast.ClassDef):
                members[stmt.name] = ("class", stmt)
            else:
                for name in assigned(stmt):
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
        if any(decorator_name(d) == "dataclass" for d in node.decorator_list):  # type: ignore[attr-defined]
            return [dataclass_signature(node)] if all(b is None for b in self.bases(cls)) else None
        for name in ("__init__", "__new__"):
            hit = self.member(cls, name)
            if hit is not None and hit.kind == "function":
                return signatures(hit.nodes, bound=True)
            if hit is not None:
                return None
        return [""]
