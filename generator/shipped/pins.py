"""Does this Python hold the versions a project's requirements.txt pins? One line if not.

Standard library only, Python 3.8+: each project ships it as scripts/pins.py, and its entry
scripts (train.py, eval.py, predict.py, export.py) and the launchers' check run it before the
framework is imported, so that a version the framework cannot work with (MindSpore's compiled
ops and NumPy 2) is one line naming the package, the version found and the one needed, not an
error deep in the first batch. `gen doctor` runs it with the project's Python.

Only requirements with a version (``numpy<2``, ``torch>=2.0``) are compared, and only where
the package is installed (a missing one is the import's own line). A requirement with an
environment marker (``; python_version < "3.9"``) is left to pip.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import NamedTuple

OPERATORS = ("===", "~=", "==", "!=", "<=", ">=", "<", ">")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_VERSION = re.compile(
    r"^(?:(\d+)!)?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?(\d*)|-(\d+))?(?:[-_.]?dev[-_.]?(\d*))?(?:\+.*)?$",
    re.IGNORECASE,
)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


class Pin(NamedTuple):
    """One requirement with a version: its name, the specifiers, and the comment above it
    in requirements.txt (the reason, where one is written)."""

    name: str
    specifiers: tuple[tuple[str, str], ...]
    why: str

    def text(self) -> str:
        return self.name + ",".join(op + version for op, version in self.specifiers)


class Mismatch(NamedTuple):
    pin: Pin
    installed: str

    def line(self, python: str = sys.executable) -> str:
        """The one line saying what is wrong and what to do."""
        why = f" ({self.pin.why})" if self.pin.why else ""
        return (
            f"this Python ({python}) has {self.pin.name} {self.installed}; the project needs "
            f"{self.pin.text()}{why}: pip install '{self.pin.text()}' "
            "(or pip install -r requirements.txt)"
        )


def parse_version(text: str) -> tuple | None:
    """A PEP 440 version as a tuple that orders as versions do; None if it is not one."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    epoch, release, pre, pre_n, post, post_n, dev = match.groups()
    numbers = tuple(int(part) for part in release.split("."))
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers = numbers[:-1]
    # Within a release: dev < pre-releases < the release < post-releases.
    if pre:
        stage = (1, _PRE[pre.lower()], int(pre_n or 0))
    elif dev is not None and post is None and post_n is None:
        stage = (0, 0, 0)
    else:
        stage = (2, 0, 0)
    posted = int(post or post_n or 0) if (post is not None or post_n is not None) else -1
    return (int(epoch or 0), numbers, stage, posted, int(dev or 0) if dev is not None else 1 << 30)


def _release(text: str) -> tuple[int, ...]:
    found = _VERSION.match(text.strip())
    return tuple(int(part) for part in found.group(2).split(".")) if found else ()


def _matches_prefix(version: str, wanted: str) -> bool:
    """``==2.1.*``: the release starts with 2.1."""
    have, prefix = _release(version), _release(wanted)
    return have[: len(prefix)] + (0,) * max(0, len(prefix) - len(have)) == prefix


def satisfies(version: str, operator: str, wanted: str) -> bool:
    """Whether ``version`` satisfies one specifier (``<``, ``2``)."""
    if operator == "===":
        return version.strip() == wanted.strip()
    if wanted.endswith(".*"):
        inside = _matches_prefix(version, wanted[:-2])
        return inside if operator == "==" else not inside if operator == "!=" else True
    have, want = parse_version(version), parse_version(wanted)
    if have is None or want is None:
        return True  # not a version this check reads: pip decides
    if operator == "~=":
        release = _release(wanted)
        upper = ".".join(map(str, release[:-1])) if len(release) > 1 else str(release[0])
        return have >= want and _matches_prefix(version, upper)
    if operator in ("==", "!="):
        # A local label (+cpu) does not count against ==2.13.0.
        same = have[:4] == want[:4] if "+" not in wanted else version.strip() == wanted.strip()
        return same if operator == "==" else not same
    if operator == "<" and want[2][0] == 2 and have[1] == want[1] and have[2][0] < 2:
        return False  # <2.0 excludes 2.0's own pre-releases
    return {
        "<": have < want,
        "<=": have <= want,
        ">": have > want,
        ">=": have >= want,
    }[operator]


def read(path: Path) -> list[Pin]:
    """The requirements of ``path`` that name versions, each with the comment above it."""
    pins: list[Pin] = []
    comment: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#"):
            comment.append(line.lstrip("#").strip())
            continue
        why = " ".join(comment).rstrip(".")
        comment = []
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("-") or ";" in line or "://" in line or " @ " in line:
            continue
        found = _NAME.match(line)
        if found is None:
            continue
        name, rest = found.groups()
        specifiers = []
        for part in filter(None, (p.strip() for p in rest.split(","))):
            op = next((o for o in OPERATORS if part.startswith(o)), None)
            if op is None:
                break
            specifiers.append((op, part[len(op) :].strip()))
        else:
            if specifiers:
                pins.append(Pin(name, tuple(specifiers), why))
    return pins


def installed(name: str) -> str | None:
    """The version of distribution ``name`` this Python holds, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def check(requirements: Path) -> list[Mismatch]:
    """The pins of ``requirements`` that the installed versions do not satisfy."""
    if not requirements.is_file():
        return []
    found = []
    for pin in read(requirements):
        have = installed(pin.name)
        if have is not None and not all(satisfies(have, op, v) for op, v in pin.specifiers):
            found.append(Mismatch(pin, have))
    return found


def main(argv: list[str]) -> int:
    """``python scripts/pins.py [--json] [requirements.txt]``: a line per mismatch (--json:
    a list of them, as gen doctor reads it), exit 2 if any."""
    as_json = "--json" in argv
    argv = [arg for arg in argv if arg != "--json"]
    path = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "requirements.txt"
    mismatches = check(path)
    if as_json:
        import json

        found = [
            {"name": m.pin.name, "installed": m.installed, "needed": m.pin.text(), "why": m.pin.why}
            for m in mismatches
        ]
        print(json.dumps({"python": sys.executable, "mismatches": found}))
    else:
        for mismatch in mismatches:
            print(f"error: {mismatch.line()}", file=sys.stderr)
        if not mismatches:
            print(f"{path}: every pinned version is installed ({sys.executable})")
    return 2 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
