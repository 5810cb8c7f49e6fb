"""Which framework APIs some Python uses, found by reading it (ast), not by running it.

A use is a dotted name rooted at an import of mindspore, torch or torch_npu
(``import mindspore as ms``, ``from mindspore.train import Model``, ``import
torch.nn.functional as F``, imports inside functions too), with the arguments of
each call. Calls on objects are followed where the code says what they are: a
variable assigned a framework object (``model = Model(...)``), a parameter or a
function annotated with a framework class, ``self.x`` set from either, and
``super().__init__`` in a subclass of a framework class, whose overriding methods
are uses as well (a hook renamed upstream would silently stop being called).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

FRAMEWORKS = ("mindspore", "torch", "torch_npu")
CALL = "()"


@dataclass(frozen=True)
class Use:
    """One use of a framework name; positional is -1 where it is not called."""

    tokens: tuple[str, ...]
    file: str
    line: int
    positional: int = -1
    keywords: tuple[str, ...] = ()
    splat: bool = False
    override: bool = False

    @property
    def dist(self) -> str:
        return self.tokens[0]

    @property
    def text(self) -> str:
        return ".".join(self.tokens).replace("." + CALL, CALL)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class _Class:
    bases: list[tuple[str, ...]]
    attributes: dict[str, tuple[str, ...]] = field(default_factory=dict)


def parse(path: Path) -> ast.Module:
    """A template module: its Jinja lines ({%- if %}) dropped, {{ }} parses as a set."""
    text = path.read_text(encoding="utf-8")
    lines = ["" if line.lstrip().startswith("{%") else line for line in text.splitlines()]
    return ast.parse("\n".join(lines), filename=str(path))


def scan(files: Iterable[Path], root: Path) -> list[Use]:
    """Every framework use in files, named relative to root."""
    trees = {path: parse(path) for path in files}
    returns: dict[str, tuple[str, ...] | None] = {}
    for tree in trees.values():
        aliases = _aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
                found = _Scope(aliases, {}, {}).annotation(node.returns)
                previous = returns.get(node.name, found)
                returns[node.name] = found if previous == found else None
    uses: list[Use] = []
    known = {name: tokens for name, tokens in returns.items() if tokens}
    for path, tree in trees.items():
        uses += _FileScan(tree, str(path.relative_to(root)), known).run()
    return sorted(set(uses), key=lambda u: (u.file, u.line, u.tokens))


def _aliases(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    aliases: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = tuple(alias.name.split("."))
                if parts[0] in FRAMEWORKS:
                    aliases[alias.asname or parts[0]] = parts if alias.asname else parts[:1]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            parts = tuple(node.module.split("."))
            if parts[0] in FRAMEWORKS:
                for alias in node.names:
                    aliases[alias.asname or alias.name] = (*parts, alias.name)
    return aliases


@dataclass
class _Scope:
    """What names mean at one point: imports, typed variables, the enclosing class."""

    aliases: dict[str, tuple[str, ...]]
    returns: dict[str, tuple[str, ...]]
    env: dict[str, tuple[str, ...]]
    cls: _Class | None = None

    def tokens(self, node: ast.AST) -> tuple[str, ...] | None:
        if isinstance(node, ast.Name):
            return self.env.get(node.id) or self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            if _is_self(node.value) and self.cls and node.attr in self.cls.attributes:
                return self.cls.attributes[node.attr]
            base = self.tokens(node.value)
            return (*base, node.attr) if base else None
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in self.returns and not self.tokens(func):
                return self.returns[func.id]
            base = self.tokens(func)
            return (*base, CALL) if base else None
        return None

    def annotation(self, node: ast.AST | None) -> tuple[str, ...] | None:
        """The instance type an annotation names (``X``, ``X | None``, ``"X"``)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.annotation(node.left) or self.annotation(node.right)
        found = self.tokens(node) if isinstance(node, ast.Name | ast.Attribute) else None
        return (*found, CALL) if found else None

    def child(self, env: dict[str, tuple[str, ...]], cls: _Class | None) -> _Scope:
        return _Scope(self.aliases, self.returns, {**self.env, **env}, cls)


class _FileScan:
    def __init__(self, tree: ast.Module, file: str, returns: dict[str, tuple[str, ...]]) -> None:
        self.tree, self.file = tree, file
        self.top = _Scope(_aliases(tree), returns, {})
        self.uses: list[Use] = []

    def run(self) -> list[Use]:
        for stmt in self.tree.body:
            self._visit(stmt, self.top)
        return self.uses

    def _emit(self, tokens: tuple[str, ...], node: ast.AST, **call: object) -> None:
        self.uses.append(Use(tokens, self.file, getattr(node, "lineno", 0), **call))  # type: ignore[arg-type]

    def _visit(self, node: ast.AST, scope: _Scope) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self._function(node, scope)
            return
        if isinstance(node, ast.ClassDef):
            self._class(node, scope)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            self._imports(node)
        elif isinstance(node, ast.Call):
            self._call(node, scope)
        elif isinstance(node, ast.Name | ast.Attribute):
            tokens = scope.tokens(node)
            if tokens:
                self._emit(tokens, node)
        for child in ast.iter_child_nodes(node):
            self._visit(child, scope)

    def _imports(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FRAMEWORKS:
                    self._emit(tuple(alias.name.split(".")), node)
        elif node.module and not node.level and node.module.split(".")[0] in FRAMEWORKS:
            for alias in node.names:
                self._emit((*node.module.split("."), alias.name), node)

    def _call(self, node: ast.Call, scope: _Scope) -> None:
        func = node.func
        tokens = scope.tokens(func)
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "__init__"
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
            and scope.cls
            and scope.cls.bases
        ):
            tokens = scope.cls.bases[0]
        if not tokens:
            return
        keywords = tuple(k.arg for k in node.keywords if k.arg)
        positional = sum(not isinstance(a, ast.Starred) for a in node.args)
        # *args or **kwargs: how many arguments, and which keywords, is not known.
        splat = positional < len(node.args) or len(keywords) < len(node.keywords)
        self._emit(tokens, node, positional=positional, keywords=keywords, splat=splat)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope) -> None:
        for child in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if child is not None:
                self._visit(child, scope)
        inner = scope.child(self._locals(node, scope), scope.cls)
        for stmt in node.body:
            self._visit(stmt, inner)

    def _locals(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope) -> dict:
        """Parameters annotated with a framework class, and variables assigned its objects."""
        env: dict[str, tuple[str, ...]] = {}
        arguments = node.args
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            found = scope.annotation(arg.annotation)
            if found:
                env[arg.arg] = found
        # A variable assigned things of different kinds means none of them for sure.
        seen: dict[str, set] = {name: {found} for name, found in env.items()}
        local = scope.child(env, scope.cls)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                target = sub.targets[0]
                if isinstance(target, ast.Name):
                    seen.setdefault(target.id, set()).add(local.tokens(sub.value))
        return {
            n: kinds.pop() for n, kinds in seen.items() if len(kinds) == 1 and None not in kinds
        }

    def _class(self, node: ast.ClassDef, scope: _Scope) -> None:
        for child in [*node.bases, *node.decorator_list]:
            self._visit(child, scope)
        bases = [t for t in (scope.tokens(b) for b in node.bases) if t]
        info = _Class(bases)
        inner = scope.child({}, info)
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                method = inner.child(self._locals(stmt, inner), info)
                for sub in ast.walk(stmt):
                    if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                        target = sub.targets[0]
                        found = method.tokens(sub.value)
                        if isinstance(target, ast.Attribute) and _is_self(target.value) and found:
                            info.attributes[target.attr] = found
        for base in bases:
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef) and not stmt.name.startswith("__"):
                    self._emit((*base, stmt.name), stmt, override=True)
        for stmt in node.body:
            self._visit(stmt, inner)


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"
