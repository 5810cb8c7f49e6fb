"""The project's layout holds: the platform floor (src/scaffold/) never imports your files,
its layers only point down, no module of it imports one that imports it back, none below
the commands' entries takes the whole config, and each option is declared once
(config.yaml and README.md name exactly the flags' options)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from src.scaffold.backend import ProjectConfig
from src.scaffold.config import DEFAULT_CONFIG, options_of

PROJECT = Path(__file__).resolve().parent.parent
SCAFFOLD = PROJECT / "src" / "scaffold"
YOURS = ("src.model", "src.data", "src.step")
# The floor's layers, bottom first: a module imports only from its own layer and those below.
LAYERS = ("errors", "config", "storage", "data", "task", "outputs", "backend", "run", "infer")


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The modules ``path`` imports, anywhere in it (function bodies too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            # from src import data / from src.scaffold.data import finder: modules too.
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def scaffold_graph() -> dict[str, set[str]]:
    """Each scaffold module and the scaffold modules it imports."""
    modules = {module_name(p): p for p in SCAFFOLD.rglob("*.py")}
    return {name: imports(path) & set(modules) for name, path in modules.items()}


def test_the_scaffold_never_imports_your_files() -> None:
    reaching = {
        module_name(path): sorted(
            name
            for name in imports(path)
            if any(name == y or name.startswith(y + ".") for y in YOURS)
        )
        for path in SCAFFOLD.rglob("*.py")
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def layer(module: str) -> int | None:
    """The layer of src.scaffold.<layer>[...], else None (the package's own __init__)."""
    parts = module.split(".")
    return LAYERS.index(parts[2]) if len(parts) > 2 and parts[2] in LAYERS else None


def test_the_floors_layers_only_point_down() -> None:
    upward = sorted(
        f"{name} imports {target}"
        for name, targets in scaffold_graph().items()
        for target in targets
        if layer(name) is not None and (layer(target) or 0) > layer(name)
    )
    assert upward == []


# The commands' entries: train.py's run, eval.py's, predict.py's and export.py's. They
# alone take the whole config; every part below gets its section or plain values.
ENTRIES = (
    "src.scaffold.run.runner",
    "src.scaffold.infer.evaluate",
    "src.scaffold.infer.predict",
    "src.scaffold.infer.export",
)
CONFIGS = {"Config", "ProjectConfig", "MSConfig"}


def config_takers(path: Path) -> list[str]:
    """The parameters in ``path`` that take the whole config: typed as it, or named cfg."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                typed = ast.unparse(arg.annotation) if arg.annotation else ""
                whole = not typed.startswith("type[")  # the class (to parse into) is not
                if arg.arg == "cfg" or (whole and CONFIGS & set(re.findall(r"\w+", typed))):
                    found.append(f"{getattr(node, 'name', 'lambda')}({arg.arg})")
    return found


def test_below_the_entries_no_scaffold_module_takes_the_whole_config() -> None:
    takers = {
        module_name(path): config_takers(path)
        for path in SCAFFOLD.rglob("*.py")
        if module_name(path) not in ENTRIES
    }
    assert {name: found for name, found in takers.items() if found} == {}
    # The check sees a taker: the entries are ones.
    assert config_takers(SCAFFOLD / "run" / "runner.py")


def test_no_scaffold_module_imports_one_that_imports_it_back() -> None:
    graph = scaffold_graph()

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    # A package's __init__ is imported with any module in it: only real modules count.
    cycles = sorted(name for name in graph if name in reach(name))
    assert cycles == []


def test_config_yaml_holds_each_option_once_under_its_flag_name() -> None:
    options = options_of(ProjectConfig)
    for name, option in options.items():
        # data: format is --data_format: a key under a section is the flag joined with _.
        assert option.key.replace(".", "_") == name
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    # A section's keys (data: format), or an option whose value is a mapping (model_args).
    keys = [
        f"{key}.{sub}" if sub is not None else key
        for key, value in raw.items()
        for sub in (value if isinstance(value, dict) and key not in options else [None])
    ]
    assert sorted(keys) == sorted(option.key for option in options.values())


def test_the_readme_option_table_names_exactly_the_flags() -> None:
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## train.py", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `--")]
    flags = [flag for row in rows for flag in re.findall(r"`(--[a-z_]+)", row.split("|")[1])]
    expected = [f"--{name}" for name in options_of(ProjectConfig)]
    assert sorted(flags) == sorted(expected)
    # Each row's second cell: the config.yaml key of its flag.
    for row in rows:
        flag = re.findall(r"`(--[a-z_]+)", row.split("|")[1])[0]
        assert f"`{options_of(ProjectConfig)[flag[2:]].key}`" in row.split("|")[2], row
