"""The recorded framework APIs (tests/data/framework_apis.json.gz) and how a dotted use resolves.

tools/record_apis.py writes the file from the pinned wheels. A use is a tuple of
tokens: names, with ``()`` for "the result of calling it" (an instance, for a
class). Resolving walks modules, then class members through the bases; where the
record cannot tell (a value, a function's result, a base outside the wheel) the
walk stops as *opaque*, which counts as present.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

RECORD = Path(__file__).resolve().parent / "data" / "framework_apis.json.gz"
CALL = "()"


@dataclass(frozen=True)
class Resolved:
    """Where a use led: status ok, opaque, missing or unrecorded, and what it reached."""

    status: str
    kind: str = ""  # module, class, instance, function, method
    detail: str = ""  # module name, definition key, or signature text
    at: str = ""  # for missing/unrecorded: the part that was not found

    def signature(self, record: Record, dist: str, version: str) -> str | None:
        """The call signature(s) of what was reached, as recorded ("?" when unknown)."""
        if self.kind == "function":
            return record.definition(dist, version, self.detail)
        if self.kind == "class":
            found = record.definition(dist, version, self.detail)
            return found["init"] if isinstance(found, dict) else None
        if self.kind == "instance":  # calling an object: its class's __call__
            found = record.member(dist, version, self.detail, "__call__")
            return found if found and found.startswith("(") else None
        return self.detail if self.kind == "method" else None

    def describe(self, record: Record, dist: str, version: str) -> str:
        """One short word or signature for reports: what this version offers here."""
        if self.status in ("missing", "unrecorded"):
            return f"{self.status} ({self.at})"
        return self.signature(record, dist, version) or self.kind or self.status


class Record:
    """The recorded names and definitions, per framework and version."""

    def __init__(self, path: Path = RECORD) -> None:
        self.path = path
        self.data = json.loads(gzip.decompress(path.read_bytes()))["frameworks"]

    def versions(self, dist: str) -> dict[str, dict]:
        return self.data.get(dist, {}).get("versions", {})

    def _pick(self, dist: str, stored: object, version: str) -> object:
        """A stored value for one version: shared by all of them, or [[versions, value], ...]."""
        if not isinstance(stored, list):
            return stored if version in self.versions(dist) else None
        for versions, value in stored:
            if version in versions.split():
                return value
        return None

    def name(self, dist: str, version: str, module: str, name: str) -> str | None:
        stored = self.data[dist]["modules"].get(module, {}).get(name)
        return None if stored is None else self._pick(dist, stored, version)  # type: ignore[return-value]

    def definition(self, dist: str, version: str, key: str) -> object:
        stored = self.data[dist]["defs"].get(key)
        return None if stored is None else self._pick(dist, stored, version)

    def namespaces(self, dist: str, version: str) -> set[str]:
        return set(self.versions(dist)[version]["namespaces"])

    def resolve(self, dist: str, version: str, tokens: tuple[str, ...]) -> Resolved:
        """Where the dotted use leads in dist==version."""
        state = Resolved("ok", "module", tokens[0])
        if tokens[0] not in self.namespaces(dist, version):
            return Resolved("unrecorded", at=tokens[0])
        for index, token in enumerate(tokens[1:], start=1):
            state = self._step(dist, version, state, token, ".".join(tokens[: index + 1]))
            if state.status != "ok":
                return state
        return state

    def _step(self, dist: str, version: str, state: Resolved, token: str, where: str) -> Resolved:
        if state.kind == "module":
            if token == CALL:
                return Resolved("opaque")
            if state.detail not in self.namespaces(dist, version):
                return Resolved("unrecorded", at=state.detail)
            return self._target(self.name(dist, version, state.detail, token), where)
        if state.kind == "class" and token == CALL:
            return Resolved("ok", "instance", state.detail)
        if state.kind in ("class", "instance"):
            name = "__call__" if token == CALL else token
            found = self.member(dist, version, state.detail, name)
            if found is None:
                return Resolved("missing", at=where)
            if found == "?" or found == "v":
                return Resolved("opaque")
            if found.startswith("c:"):
                return Resolved("ok", "class", found[2:])
            return Resolved("ok", "method", found) if token != CALL else Resolved("opaque")
        return Resolved("opaque")

    def _target(self, ref: str | None, where: str) -> Resolved:
        if ref is None:
            return Resolved("missing", at=where)
        kinds = {"m": "module", "c": "class", "f": "function"}
        kind, _, rest = ref.partition(":")
        return Resolved("ok", kinds[kind], rest) if kind in kinds else Resolved("opaque")

    def member(self, dist: str, version: str, key: str, name: str, depth: int = 0) -> str | None:
        """A class member as recorded (signature, "v", "c:key"), through the bases; "?" unknown."""
        found = self.definition(dist, version, key)
        if not isinstance(found, dict) or depth > 30:
            return "?"
        if name == "__init__":
            return found["init"]
        if found["members"] is None:
            return "?"
        if name in found["members"]:
            return found["members"][name]
        unknown = False
        for base in found["bases"]:
            if base == "?":
                unknown = True
                continue
            hit = self.member(dist, version, base[2:], name, depth + 1)
            if hit is not None:
                return hit
        return "?" if unknown else None


def accepts(signatures: str, positional: int, keywords: tuple[str, ...]) -> str:
    """Why a call with these arguments fits none of the signatures ("" when one fits)."""
    if signatures == "?":
        return ""
    reasons = []
    for text in signatures[1:-1].split(")|("):
        reason = _misfit(text.split(",") if text else [], positional, keywords)
        if not reason:
            return ""
        reasons.append(reason)
    return "; ".join(dict.fromkeys(reasons))


def _misfit(params: list[str], positional: int, keywords: tuple[str, ...]) -> str:
    varargs = any(p.startswith("*") and not p.startswith("**") and p != "*" for p in params)
    varkw = any(p.startswith("**") for p in params)
    slots, named, seen_star, required = [], set(), False, []
    for param in params:
        if param in ("/",) or param.startswith("**"):
            continue
        if param.startswith("*"):
            seen_star = True
            continue
        name, has_default = param.rstrip("="), param.endswith("=")
        if not seen_star:
            slots.append(name)
        named.add(name)
        if not has_default:
            required.append(name)
    posonly = params[: params.index("/")] if "/" in params else []
    named -= {p.rstrip("=") for p in posonly}
    if positional > len(slots) and not varargs:
        return f"takes {len(slots)} positional arguments, not {positional}"
    unknown = [k for k in keywords if k not in named]
    if unknown and not varkw:
        return f"has no keyword {', '.join(unknown)}"
    given = set(slots[:positional]) | set(keywords)
    lacking = [r for r in required if r not in given]
    return f"requires {', '.join(lacking)}" if lacking else ""


def difference(theirs: str, mine: str) -> str:
    """How a pinned signature differs from the local one, by parameter."""
    if not (theirs.startswith("(") and mine.startswith("(")):
        return f"is {theirs}, not {mine}"
    old, new = _params(theirs), _params(mine)
    parts = []
    if set(new) - set(old):
        parts.append("lacks " + ", ".join(n + new[n] for n in new if n not in old))
    if set(old) - set(new):
        parts.append("also has " + ", ".join(n + old[n] for n in old if n not in new))
    changed = [n for n in new if n in old and old[n] != new[n]]
    if changed:
        parts.append("differs in " + ", ".join(f"{n}{old[n]} (local {n}{new[n]})" for n in changed))
    return "; ".join(parts) or f"has other overloads: {theirs}"


def _params(signature: str) -> dict[str, str]:
    """{name: "=" when every overload gives it a default, else ""}, over all overloads."""
    found: dict[str, str] = {}
    for text in signature[1:-1].split(")|("):
        for param in filter(None, text.split(",")):
            name, default = param.rstrip("="), "=" if param.endswith("=") else ""
            if name not in ("/", "*"):
                found[name] = default if found.get(name, default) == default else ""
    return found
