"""Check manifests as an API server would, with no server: offline and in-process.

Custom resources are checked against their CRD's ``openAPIV3Schema`` for the served
version (tests/data/crds/, copied unchanged from upstream), read the way the API
server reads it:

- unknown fields are an error here, where the server would silently prune them
  (everywhere but under ``x-kubernetes-preserve-unknown-fields``);
- ``x-kubernetes-int-or-string`` takes an integer or a string;
- ``x-kubernetes-list-type: map|set`` lists may not repeat a key or an item;
- ``int32``/``int64`` formats are range-checked;
- ``x-kubernetes-validations`` CEL rules are evaluated (transition rules, which
  compare with ``oldSelf``, apply only on update and are skipped).

Core objects (a ConfigMap, every pod template, each document's ObjectMeta) go
through kubernetes-validate's strict schemas for KUBERNETES_VERSION.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import yaml

CRD_DIR = Path(__file__).resolve().parent / "data" / "crds"
KUBERNETES_VERSION = "1.30"
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Crd:
    """The served version of one CRD, with the provenance line of its file."""

    api_version: str
    kind: str
    schema: dict[str, Any]
    path: Path
    provenance: str


@cache
def crds(release: str = "") -> dict[tuple[str, str], Crd]:
    """Every CRD in CRD_DIR by (apiVersion, kind); with ``release`` (a directory such as
    trainer-v2.0), that release's CRDs in place of the newest, which share apiVersions."""
    found = {}
    paths = sorted(CRD_DIR.glob("*.yaml"))
    if release:
        paths += sorted((CRD_DIR / release).glob("*.yaml"))
        assert len(paths) > len(list(CRD_DIR.glob("*.yaml"))), f"no CRDs in {CRD_DIR / release}"
    for path in paths:
        text = path.read_text(encoding="utf-8")
        provenance = text.splitlines()[0].removeprefix("# Provenance: ")
        for doc in yaml.load_all(text, Loader=yaml.CSafeLoader):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if version.get("served"):
                    api_version = f"{spec['group']}/{version['name']}"
                    schema = version["schema"]["openAPIV3Schema"]
                    crd = Crd(api_version, spec["names"]["kind"], schema, path, provenance)
                    found[(api_version, crd.kind)] = crd
    return found


def problems(doc: dict[str, Any], release: str = "") -> list[str]:
    """What the API server would refuse (or silently drop) in ``doc``; [] if nothing.
    ``release`` names the operator release whose CRDs to check against (see crds())."""
    key = (doc.get("apiVersion", ""), doc.get("kind", ""))
    if "/" not in key[0]:
        return _core(doc)
    crd = crds(release).get(key)
    if crd is None:
        return [f"no CRD for {key[0]} {key[1]} in {CRD_DIR / release}"]
    found = [_where(err) for err in _validator(key, release).iter_errors(doc)]
    # The server checks a custom resource's metadata as ObjectMeta, whatever the schema says.
    meta = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc.get("metadata")}
    return found + [f"metadata: {p}" for p in _core(meta)]


def pod_template_problems(template: dict[str, Any]) -> list[str]:
    """A pod template checked against the core v1 PodTemplateSpec schema."""
    wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
    return _core({**wrapped, "template": template})


def _core(doc: dict[str, Any]) -> list[str]:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        path = "/".join(str(p) for p in err.path)
        return [f"{path}: {err.message}"]
    return []


def _where(err: jsonschema.ValidationError) -> str:
    return f"{'/'.join(str(p) for p in err.absolute_path)}: {err.message}"


@cache
def _validator(key: tuple[str, str], release: str = "") -> jsonschema.protocols.Validator:
    schema = structural(crds(release)[key].schema, top=True)
    return _KubeValidator(schema, format_checker=_formats())


def structural(node: dict[str, Any], top: bool = False) -> dict[str, Any]:
    """A copy of a CRD schema node with the server's pruning spelled out for jsonschema."""
    out = {k: v for k, v in node.items() if k != "description"}
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    props = out.get("properties")
    if props is not None:
        # The root's metadata is ObjectMeta, checked by problems() itself.
        out["properties"] = {
            k: v if top and k == "metadata" else structural(v) for k, v in props.items()
        }
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = structural(out["additionalProperties"])
    if isinstance(out.get("items"), dict):
        out["items"] = structural(out["items"])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in out:
            out[key] = [structural(sub) for sub in out[key]]
    prunes = out.get("type") == "object" and not out.get("x-kubernetes-preserve-unknown-fields")
    if prunes and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _formats() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()
    for name, (low, high) in INT_RANGES.items():
        checker.checks(name)(lambda value, low=low, high=high: _in_range(value, low, high))
    return checker


def _in_range(value: object, low: int, high: int) -> bool:
    return not isinstance(value, int) or low <= value <= high


def _list_type(validator: Any, value: str, instance: Any, schema: dict[str, Any]) -> Iterator:
    if not isinstance(instance, list) or value not in ("map", "set"):
        return
    keys = schema.get("x-kubernetes-list-map-keys", [])
    seen: list[Any] = []
    for item in instance:
        key = tuple(item.get(k) for k in keys) if value == "map" else item
        if key in seen:
            yield jsonschema.ValidationError(f"duplicate entry {key!r} in a list-type={value}")
        seen.append(key)


@cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _cel_rules(validator: Any, rules: list[dict], instance: Any, schema: dict) -> Iterator:
    for rule in rules:
        if "oldSelf" in rule["rule"]:
            continue
        try:
            passed = bool(_program(rule["rule"]).evaluate({"self": celpy.json_to_cel(instance)}))
        except celpy.CELEvalError as err:
            # The server refuses an object a rule cannot be evaluated on, too.
            yield jsonschema.ValidationError(f"{rule['rule']}: {err}")
            continue
        if not passed:
            yield jsonschema.ValidationError(rule.get("message") or f"failed {rule['rule']}")


_KubeValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator,
    {"x-kubernetes-list-type": _list_type, "x-kubernetes-validations": _cel_rules},
)
