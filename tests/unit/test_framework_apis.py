"""The template's MindSpore and torch calls exist, with the arguments it passes, in every
version images/catalog.yaml pins, not only in the CPU versions the tests run here.

tests/data/framework_apis.json.gz holds each pinned wheel's public API (tools/record_apis.py
reads the wheels without installing them); tests/api_usage.py finds what the template's
Python uses. Run with ``-rP`` to see which used APIs differ from the local versions.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

from generator import catalog as cat
from tests.api_record import Record, Resolved, accepts, difference
from tests.api_usage import Use, scan

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "{{cookiecutter.project}}"

# Pinned versions with no recorded API: (framework, version) -> why.
UNRECORDED = {
    ("mindspore", "2.6.0"): "not on PyPI, where the recorder downloads wheels (catalog notes)",
}
# Uses a pinned version may lack or call differently: (use, framework, version) -> why.
# The code must cope (branch on the version, catch the error); say how.
ALLOWED = {
    ("torch.amp.GradScaler", "torch", "1.13.1"): (
        "precision.py uses torch.amp.GradScaler only where hasattr(torch.amp, 'GradScaler') "
        "(torch 2.3 on) and the device's own torch.cuda.amp.GradScaler before"
    ),
}
# shard: full needs FSDP2 (torch.distributed.fsdp.fully_shard, public from torch 2.6):
# backend/sharding.py's wrap checks hasattr(fsdp, "fully_shard") and says so in one line first.
FSDP2 = ("fully_shard", "MixedPrecisionPolicy")
for _name in FSDP2:
    for _version in ("1.13.1", "2.4.0", "2.4.1", "2.5.1"):
        ALLOWED[(f"torch.distributed.fsdp.{_name}", "torch", _version)] = (
            "sharding.wrap refuses shard: full in one line where fsdp has no fully_shard"
        )
# Uses under a module a pinned version lacks altogether: (prefix, framework, version) -> why.
ALLOWED_UNDER = {
    ("torch.distributed.checkpoint", "torch", "1.13.1"): (
        "only shard: full writes sharded checkpoints (refused before torch 2.6); shards.py's "
        "directory() reads none, in one line, where torch.distributed.checkpoint is missing"
    ),
}
# torch_npu sets torch.npu when imported; the template reaches torch.npu only after
# `import torch_npu` succeeded, so these uses are checked against the entries' torch_npu.
REDIRECTS = {("torch", "npu"): ("torch_npu", "npu")}
# The versions tests and benchmarks run here (pyproject.toml's extras).
LOCAL_RE = re.compile(r'"(torch|mindspore)==([\w.]+)"')


@cache
def local_versions() -> dict[str, str]:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    return dict(LOCAL_RE.findall(text))


@cache
def pins() -> dict[str, dict[str, list[str]]]:
    """{framework: {version: [catalogue entries pinning it]}} for torch, torch_npu, mindspore."""
    found: dict[str, dict[str, list[str]]] = {"torch": {}, "torch_npu": {}, "mindspore": {}}
    for entry in cat.load().entries.values():
        versions = {
            "torch": entry.pytorch and entry.pytorch.torch,
            "torch_npu": entry.pytorch and entry.pytorch.torch_npu,
            "mindspore": entry.mindspore and entry.mindspore.version,
        }
        for dist, version in versions.items():
            if version:
                found[dist].setdefault(version, []).append(entry.id)
    return found


@pytest.fixture(scope="module")
def record() -> Record:
    return Record()


@pytest.fixture(scope="module")
def uses() -> dict[tuple, list[Use]]:
    """The template's framework uses, grouped by what is checked (name and arguments)."""
    found = scan(sorted(TEMPLATE.rglob("*.py")), TEMPLATE)
    assert found, "no framework use found in the template: is the scanner broken?"
    return _group(found)


def _group(found: list[Use]) -> dict[tuple, list[Use]]:
    grouped: dict[tuple, list[Use]] = defaultdict(list)
    for use in found:
        key = (_target(use.tokens), use.positional, use.keywords, use.splat, use.override)
        grouped[key].append(use)
    return dict(grouped)


def _target(tokens: tuple[str, ...]) -> tuple[str, ...]:
    redirect = REDIRECTS.get(tokens[:2])
    return (*redirect, *tokens[2:]) if redirect else tokens


def _versions(dist: str) -> dict[str, list[str]]:
    """The versions a use of dist is checked in: the pinned ones and the local one."""
    versions = {v: list(entries) for v, entries in pins()[dist].items()}
    local = local_versions().get(dist)
    if local:
        versions.setdefault(local, []).append("local")
    return {v: e for v, e in versions.items() if (dist, v) not in UNRECORDED}


def _problem(record: Record, key: tuple, dist: str, version: str) -> str:
    """Why the use grouped under key fails in dist==version ("" when it does not)."""
    tokens, positional, keywords, splat, override = key
    resolved = record.resolve(dist, version, tokens)
    if override:
        # Only a method the framework itself has (in the local version) is a hook to keep.
        local = local_versions().get(dist, version)
        if record.resolve(dist, local, tokens).status == "missing" or resolved.status != "missing":
            return ""
        return "has no such method: the override is never called"
    if resolved.status == "missing":
        return f"has no {resolved.at}"
    if resolved.status == "unrecorded":
        return f"was not recorded ({resolved.at}: add it to NAMESPACES in tools/record_apis.py)"
    if positional < 0 or splat:
        return ""
    signature = resolved.signature(record, dist, version)
    reason = accepts(signature, positional, keywords) if signature else ""
    return f"{reason}; signature ({_plain(signature)})" if reason else ""


def _plain(signature: str | None) -> str:
    return (signature or "?").replace(")|(", " | ").strip("()")


def _call(key: tuple) -> str:
    tokens, positional, keywords, splat, override = key
    text = ".".join(tokens).replace(".()", "()")
    if override:
        return f"{text} (overridden)"
    if positional < 0:
        return text
    arguments = ["_"] * positional + [f"{k}=" for k in keywords] + (["*..."] if splat else [])
    return f"{text}({', '.join(arguments)})"


def test_every_pinned_version_is_recorded(record: Record) -> None:
    missing = [
        f"{dist} {version} ({', '.join(entries)})"
        for dist, versions in pins().items()
        for version, entries in versions.items()
        if version not in record.versions(dist) and (dist, version) not in UNRECORDED
    ]
    assert not missing, f"not in {record.path.name}, run tools/record_apis.py: {missing}"
    for (dist, version), why in UNRECORDED.items():
        assert version in pins()[dist] and version not in record.versions(dist), why


def allowed(text: str, dist: str, version: str) -> bool:
    under = ((p, d, v) for p, d, v in ALLOWED_UNDER if text == p or text.startswith(f"{p}."))
    return (text, dist, version) in ALLOWED or (dist, version) in {(d, v) for _, d, v in under}


def problems(record: Record, uses: dict[tuple, list[Use]]) -> list[str]:
    """One line per use and version where it fails: the call, where, version, entries, why."""
    found = []
    for key, places in uses.items():
        dist = key[0][0]
        for version, entries in _versions(dist).items():
            text = ".".join(key[0]).replace(".()", "()")
            reason = _problem(record, key, dist, version)
            if reason and not allowed(text, dist, version):
                where = ", ".join(sorted({u.where for u in places}))
                found.append(
                    f"{_call(key)} at {where}: {dist} {version} ({', '.join(entries)}) {reason}"
                )
    return sorted(found)


def test_template_apis_exist_in_every_pinned_version(
    record: Record, uses: dict[tuple, list[Use]]
) -> None:
    found = problems(record, uses)
    assert not found, "\n".join(["", *found, "", changed_report(record, uses)])


def test_a_missing_api_or_keyword_fails_naming_the_version_and_entry(
    tmp_path: Path, record: Record
) -> None:
    code = tmp_path / "train.py"
    code.write_text(
        "import mindspore as ms\n"
        "from mindspore.train import Model\n"
        "ms.no_such_api()\n"
        "Model(None).train(1, None, no_such_keyword=True)\n"
        "ms.value_and_grad(print, None, None, sens_param=True)\n",
        encoding="utf-8",
    )
    found = "\n".join(problems(record, _group(scan([code], tmp_path))))
    assert (
        "mindspore.no_such_api() at train.py:3: mindspore 2.7.0 (cann8.2.rc1-910-ubuntu22.04) "
        "has no mindspore.no_such_api"
    ) in found
    assert "train.py:4: mindspore 2.9.0 (cuda11.6-ubuntu20.04, " in found
    assert "has no keyword no_such_keyword; signature (epoch,train_dataset," in found
    # sens_param came after 2.7.1: only the older pins fail.
    assert "sens_param=) at train.py:5: mindspore 2.7.1 (cann8.3.rc1-910b-ubuntu22.04)" in found
    assert "sens_param=) at train.py:5: mindspore 2.8.0" not in found


def test_allowed_differences_still_occur(record: Record, uses: dict[tuple, list[Use]]) -> None:
    """An allow-list entry whose difference is gone is stale: remove it."""
    live = {
        (".".join(key[0]).replace(".()", "()"), key[0][0], version)
        for key in uses
        for version in _versions(key[0][0])
        if _problem(record, key, key[0][0], version)
    }
    assert not set(ALLOWED) - live, sorted(set(ALLOWED) - live)
    for prefix, dist, version in ALLOWED_UNDER:
        assert any(t.startswith(prefix) and (d, v) == (dist, version) for t, d, v in live), prefix


def changed_report(record: Record, uses: dict[tuple, list[Use]]) -> str:
    """The used APIs that differ in a pinned version from the local one, and how."""
    lines = []
    local = local_versions()
    for tokens in sorted({key[0] for key in uses if not key[4]}):
        dist, reference = tokens[0], local.get(tokens[0], "")
        if reference not in record.versions(dist):
            continue
        mine = record.resolve(dist, reference, tokens).describe(record, dist, reference)
        by_change: dict[str, list[str]] = defaultdict(list)
        for version in sorted(_versions(dist), key=_release):
            theirs = record.resolve(dist, version, tokens).describe(record, dist, version)
            if version != reference and theirs != mine:
                by_change[difference(theirs, mine)].append(version)
        text = ".".join(tokens).replace(".()", "()")
        for change, versions in by_change.items():
            lines.append(f"  {text}: {dist} {', '.join(versions)} {change} (local {reference})")
    title = "Used APIs that differ from the local versions:"
    return "\n".join([title, *lines]) if lines else "Used APIs: none differs from local."


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def test_report_apis_that_differ_from_the_local_versions(
    record: Record, uses: dict[tuple, list[Use]]
) -> None:
    report = changed_report(record, uses)
    print(report)  # shown with pytest -rP
    assert report.startswith("Used APIs")


def test_mindspore_wheels_accept_their_entries_cann_and_cuda(record: Record) -> None:
    """Each MindSpore wheel's own run_check lists the CANN or CUDA it supports."""
    for entry in cat.load().entries.values():
        pin = entry.mindspore
        if pin is None or pin.version not in record.versions("mindspore"):
            continue
        build = record.versions("mindspore")[pin.version]["build"]
        if entry.target == "ascend":
            cann = ".".join(entry.cann.split(".")[:2])  # type: ignore[union-attr]
            assert cann in build["cann"], (entry.id, build["cann"])
        else:
            cuda = ".".join(entry.cuda.split(".")[:2])  # type: ignore[union-attr]
            assert cuda in build["cuda"] and f"gpu{cuda}" in build["plugins"], (entry.id, build)


def test_redirected_and_resolved_uses_read_as_expected(record: Record) -> None:
    """The record answers as the template's checks assume, on uses known to exist."""
    ms = local_versions()["mindspore"]
    assert record.resolve("mindspore", ms, ("mindspore", "nn", "Momentum")).kind == "class"
    found = record.resolve("mindspore", ms, ("mindspore", "train", "Model", "()", "train"))
    assert found.kind == "method" and "dataset_sink_mode=" in found.detail
    missing = record.resolve("mindspore", ms, ("mindspore", "nn", "NoSuchLayer"))
    assert missing == Resolved("missing", at="mindspore.nn.NoSuchLayer")
    assert _target(("torch", "npu", "set_device")) == ("torch_npu", "npu", "set_device")


SNIPPET = """
import torch
import torch.nn.functional as F
from torch import nn
from mindspore import nn as msnn
from mindspore.train import Callback, Model

def train(optimizer: torch.optim.Optimizer, x: "torch.Tensor | None") -> None:
    import torch_npu
    model = Model(msnn.Dense(2, 3), loss_fn=None)
    model.train(1, None, callbacks=[])
    optimizer.zero_grad(set_to_none=True)
    F.cross_entropy(x, x, *rest, reduction="sum")
    torch.npu.set_device(0)

def dataset() -> msnn.Cell:
    ...

class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(2, 3)

    def forward(self, x):
        return self.head.forward(x)

class Hook(Callback):
    def on_train_epoch_end(self, run_context):
        dataset().set_train(False)
"""


def test_the_scanner_follows_imports_annotations_assignments_and_subclasses(
    tmp_path: Path,
) -> None:
    code = tmp_path / "snippet.py"
    code.write_text(SNIPPET, encoding="utf-8")
    calls = {
        (u.text, u.positional, u.keywords, u.splat)
        for u in scan([code], tmp_path)
        if u.positional >= 0
    }
    assert calls >= {
        ("mindspore.train.Model", 1, ("loss_fn",), False),
        ("mindspore.nn.Dense", 2, (), False),
        ("mindspore.train.Model().train", 2, ("callbacks",), False),
        ("torch.optim.Optimizer().zero_grad", 0, ("set_to_none",), False),
        ("torch.nn.functional.cross_entropy", 2, ("reduction",), True),
        ("torch.npu.set_device", 1, (), False),
        ("torch.nn.Module", 0, (), False),  # super().__init__()
        ("torch.nn.Linear", 2, (), False),
        ("torch.nn.Linear().forward", 1, (), False),  # self.head
        ("mindspore.nn.Cell().set_train", 1, (), False),  # dataset()'s annotation
    }
    others = {u.text for u in scan([code], tmp_path) if u.positional < 0}
    assert {"torch_npu", "torch.nn.Module.forward", "mindspore.train.Callback"} <= others
    assert "mindspore.train.Callback.on_train_epoch_end" in {
        u.text for u in scan([code], tmp_path) if u.override
    }


@pytest.mark.parametrize(
    ("signature", "positional", "keywords", "says"),
    [
        ("(a,b=,*,c=)", 1, ("c",), ""),
        ("(a,b=,*,c=)", 3, (), "takes 2 positional arguments, not 3"),
        ("(a,b=,*,c=)", 1, ("d",), "has no keyword d"),
        ("(a,b=,*,c=)", 0, ("b",), "requires a"),
        ("(a,/,b=)", 0, ("a",), "has no keyword a"),
        ("(*args,**kwargs)", 5, ("anything",), ""),
        ("(a)|(a,b)", 2, (), ""),
        ("?", 9, ("x",), ""),
    ],
)
def test_a_call_is_checked_against_every_overload(
    signature: str, positional: int, keywords: tuple[str, ...], says: str
) -> None:
    assert accepts(signature, positional, keywords) == says
