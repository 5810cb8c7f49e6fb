"""tools/wheel_api.py reads a wheel's exports as Python would bind them, without importing it."""

from __future__ import annotations

import importlib
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
FILES = {
    "pkg/__init__.py": (
        "from pkg.core import *\n"
        "from pkg import sub\n"
        "from pkg.core import helper as alias\n"
        "try:\n    from pkg.fast import speed\nexcept ImportError:\n    speed = None\n"
    ),
    "pkg/core.py": (
        '__all__ = ["Thing", "make"]\n'
        "class Base:\n"
        "    def __init__(self, a, b=1, *, c):\n        self.ready = True\n"
        "    def run(self, x, **kw): ...\n"
        "class Thing(Base):\n"
        "    @property\n    def size(self): ...\n"
        "def make(n, /, m=2, *args, k, **kw): ...\n"
        "def helper(): ...\n"
    ),
    "pkg/sub/__init__.py": (
        "from typing import overload\n"
        "@overload\ndef f(a: int) -> int: ...\n"
        "@overload\ndef f(a: str, b: str) -> str: ...\n"
    ),
    "pkg/_native.pyi": "class Handle:\n    def __init__(self, fd: int) -> None: ...\n",
    "pkg/fast.py": "from pkg._native import Handle as speed\n",
    "pkg-1.0.dist-info/METADATA": "Name: pkg\n",
}


@pytest.fixture(scope="module")
def wheel_api() -> Iterator[ModuleType]:
    """tools/wheel_api.py, imported as the recorder does: tools/ first on the path."""
    sys.path.insert(0, str(TOOLS))
    try:
        yield importlib.import_module("wheel_api")
    finally:
        sys.path.remove(str(TOOLS))


@pytest.fixture
def wheel(tmp_path: Path, wheel_api: ModuleType) -> Any:
    path = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in FILES.items():
            archive.writestr(name, text)
    return wheel_api.Wheel(path)


def test_names_follow_star_imports_all_aliases_and_submodules(wheel: Any) -> None:
    names = wheel.public_names("pkg")
    assert sorted(names) == ["Thing", "alias", "core", "fast", "make", "speed", "sub"]
    assert (names["Thing"].kind, names["Thing"].key) == ("class", "pkg.core:Thing")
    assert (names["alias"].kind, names["alias"].key) == ("function", "pkg.core:helper")
    assert names["sub"].kind == "module" and names["core"].kind == "module"
    # The try branch binds speed; its stub is a compiled class.
    assert (names["speed"].kind, names["speed"].key) == ("class", "pkg._native:Handle")


def test_signatures_keep_names_defaults_and_star_parameters(
    wheel: Any, wheel_api: ModuleType
) -> None:
    names = wheel.public_names("pkg")
    assert wheel_api.signatures(names["make"].nodes, bound=False) == ["n,/,m=,*args,k,**kw"]
    assert wheel.constructor(names["Thing"]) == ["a,b=,*,c"]  # inherited from Base
    assert wheel.constructor(names["speed"]) == ["fd"]
    run = wheel.member(names["Thing"], "run")
    assert wheel_api.signatures(run.nodes, bound=True) == ["x,**kw"]
    assert wheel.member(names["Thing"], "size").kind == "value"  # a property
    assert wheel.member(names["Thing"], "ready").kind == "value"  # set in __init__
    assert wheel.member(names["Thing"], "missing") is None
    overloads = wheel.public_names("pkg.sub")["f"].nodes
    assert wheel_api.signatures(overloads, bound=False) == ["a", "a,b"]
