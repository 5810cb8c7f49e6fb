"""Record the public API of every framework version the catalogue pins (and the local ones).

    .venv/bin/python tools/record_apis.py             # record what is missing
    .venv/bin/python tools/record_apis.py --only mindspore==2.9.0 --refresh

For each torch, torch_npu and mindspore version in images/catalog.yaml, plus the torch
and mindspore that pyproject.toml's extras install here, it takes the wheel (from
--wheels folders, else ``pip download --no-deps --only-binary=:all:`` into a temporary
folder deleted right after), reads its Python sources with zipfile and ast (nothing is
installed or imported: see tools/wheel_api.py) and writes what NAMESPACES export, with
signatures, to tests/data/framework_apis.json.gz (``zcat`` shows it), where
tests/unit/test_framework_apis.py checks the template against it offline.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from wheel_api import Target, Wheel, signatures

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "tests" / "data" / "framework_apis.json.gz"
FORMAT = 1

# The modules whose public names are recorded; True: their submodules too.
NAMESPACES = {
    "mindspore": {
        "mindspore": False,
        "mindspore.nn": False,
        "mindspore.ops": False,
        "mindspore.amp": False,
        "mindspore.train": False,
        "mindspore.train.callback": False,
        "mindspore.communication": False,
        "mindspore.communication.management": False,
        "mindspore.dataset": False,
        "mindspore.context": False,
        "mindspore.device_context": True,
    },
    "torch": {
        "torch": False,
        "torch.nn": False,
        "torch.nn.functional": False,
        "torch.nn.init": False,
        "torch.nn.parallel": False,
        "torch.nn.utils": False,
        "torch.optim": False,
        "torch.optim.lr_scheduler": False,
        "torch.distributed": False,
        "torch.distributed.fsdp": False,
        "torch.distributed.checkpoint": False,
        "torch.distributed.checkpoint.state_dict": False,
        "torch.amp": False,
        "torch.autograd": False,
        "torch.cuda": False,
        "torch.cuda.amp": False,
        "torch.backends": False,
        "torch.backends.cudnn": False,
        "torch.utils": False,
        "torch.utils.checkpoint": False,
        "torch.utils.data": False,
        "torch.onnx": False,
        "torch.jit": False,
    },
    "torch_npu": {"torch_npu": False, "torch_npu.npu": False, "torch_npu.npu.amp": False},
}
# Which wheel to read: (python, platforms) in order of preference. torch takes the Linux
# aarch64 wheel, the CPU build Ascend's aarch64 hosts install (about 100 MB where the
# x86_64 one is about 800 MB); its Python sources are the x86_64 wheel's.
X86 = (
    "manylinux1_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux_2_28_x86_64",
)
ARM = ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64")
PYTHONS = ("3.11", "3.10", "3.9", "3.12", "3.8")
CANDIDATES = {
    "torch": [(py, ARM) for py in PYTHONS] + [(py, X86) for py in PYTHONS],
    "torch_npu": [(py, X86) for py in PYTHONS] + [(py, ARM) for py in PYTHONS],
    "mindspore": [(py, X86) for py in PYTHONS],
}
LOCAL_WHEELS = (Path("/opt/wheels"),)


def pinned() -> dict[str, dict[str, list[str]]]:
    """{distribution: {version: [who pins it: catalogue entry ids, or "local"]}}."""
    found: dict[str, dict[str, list[str]]] = {dist: {} for dist in NAMESPACES}
    data = yaml.safe_load((REPO / "images" / "catalog.yaml").read_text(encoding="utf-8"))
    for entry_id, entry in data["entries"].items():
        pins = {
            "torch": (entry.get("pytorch") or {}).get("torch"),
            "torch_npu": (entry.get("pytorch") or {}).get("torch_npu"),
            "mindspore": (entry.get("mindspore") or {}).get("version"),
        }
        for dist, version in pins.items():
            if version:
                found[dist].setdefault(str(version), []).append(entry_id)
    # The extras' exact pins (tomllib is Python 3.11+; the pins are plain strings).
    project = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    for dist, version in re.findall(r'"(torch|mindspore)==([\w.]+)"', project):
        found[dist].setdefault(version, []).append("local")
    return found


def find_wheel(dist: str, version: str, folders: list[Path], tmp: Path) -> Path | None:
    """A wheel of dist==version: one in folders, else one pip downloads into tmp."""
    for folder in folders:
        for path in sorted(folder.glob(f"{dist}-{version}[-+]*.whl")):
            return path
    for python, platforms in CANDIDATES[dist]:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        command += ["--python-version", python, "--dest", str(tmp)]
        command += [arg for platform in platforms for arg in ("--platform", platform)]
        result = subprocess.run(
            [*command, f"{dist}=={version}"], capture_output=True, text=True, check=False
        )
        wheels = sorted(tmp.glob("*.whl"))
        if result.returncode == 0 and wheels:
            return wheels[0]
    return None


def ref(target: Target) -> str:
    """How a name's target is written: m:module, f:/c:module:qualname, v (value), ? (unknown)."""
    if target.kind == "module":
        return "m:" + target.module
    if target.kind in ("function", "class"):
        return f"{target.kind[0]}:{target.key}"
    return "v" if target.kind == "value" else "?"


def sig_text(sigs: list[str] | None) -> str:
    return "?" if sigs is None else "|".join(f"({s})" for s in sigs)


def describe_class(wheel: Wheel, cls: Target) -> tuple[dict, list[Target]]:
    """A class as data (its constructor, bases and public members) and the classes it needs."""
    more = [base for base in wheel.bases(cls) if base is not None and base.kind == "class"]
    bases = [ref(b) if b.kind == "class" else "?" for b in wheel.bases(cls) if b is not None]
    members: dict[str, str] | None = {}
    if wheel.files[cls.module].endswith(".pyi"):
        # A compiled class's stub: hundreds of tensor methods no use can reach (null: unknown).
        members = None
    else:
        for name, member in wheel.own_members(cls).items():
            if name.startswith("_") and name != "__call__":
                continue
            if member[0] == "method":
                members[name] = sig_text(signatures(member[1], bound=True))
            elif member[0] == "class":
                nested = Target("class", cls.module, f"{cls.qualname}.{name}", (member[1],))
                members[name] = ref(nested)
                more.append(nested)
            else:
                members[name] = "v"
    return {"init": sig_text(wheel.constructor(cls)), "bases": bases, "members": members}, more


def record(wheel: Wheel, dist: str) -> dict:
    """names (public path -> ref), defs (ref key -> signature or class) and namespaces."""
    names: dict[str, str] = {}
    queue: list[Target] = []
    modules = []
    for namespace, recursive in NAMESPACES[dist].items():
        todo = [namespace]
        while todo:
            module = todo.pop()
            if not wheel.has_module(module):
                continue
            modules.append(module)
            for name, target in wheel.public_names(module).items():
                names[f"{module}.{name}"] = ref(target)
                queue.append(target)
            if recursive:
                todo += wheel.submodules(module)
    defs: dict[str, object] = {}
    while queue:
        target = queue.pop()
        if target.kind not in ("function", "class") or target.key in defs:
            continue
        if target.kind == "function":
            defs[target.key] = sig_text(signatures(target.nodes, bound=False))
        else:
            defs[target.key], more = describe_class(wheel, target)
            queue += more
    return {"names": names, "defs": defs, "namespaces": sorted(modules)}


def build_info(wheel: Wheel) -> dict:
    """What a MindSpore wheel says of its backends: the CANN and CUDA versions it accepts."""
    info: dict[str, object] = {}
    for module in ("mindspore.run_check._check_version", "mindspore._check_version"):
        member = wheel.files.get(module)
        if member is None:
            continue
        for node in ast.walk(ast.parse(wheel.read(member))):
            if isinstance(node, ast.ClassDef) and node.name in (
                "AscendEnvChecker",
                "GPUEnvChecker",
            ):
                key = "cann" if node.name.startswith("Ascend") else "cuda"
                info[key] = _self_version(node)
        break
    version_file = "mindspore/lib/plugin/ascend/custom_ascendc_910b/version.info"
    if version_file in wheel.zip.namelist():
        info["cann_compiled"] = wheel.read(version_file).strip().partition("=")[2]
    plugins = {
        n.split("/")[3] for n in wheel.zip.namelist() if n.startswith("mindspore/lib/plugin/")
    }
    info["plugins"] = sorted(p for p in plugins if "." not in p or p.startswith("gpu"))
    return info


def _self_version(cls: ast.ClassDef) -> list[str] | None:
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Attribute)
            and node.targets[0].attr == "version"
            and isinstance(node.value, ast.List)
        ):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return None


def load(path: Path) -> dict:
    """The recorded data exploded to {dist: {"versions", "names", "defs"}}, values per version.

    names is keyed by public path (``torch.nn.Linear``), defs by definition
    (``torch.nn.modules.linear:Linear``).
    """
    data: dict = {dist: {"versions": {}, "names": {}, "defs": {}} for dist in NAMESPACES}
    if not path.is_file():
        return data
    stored = json.loads(gzip.decompress(path.read_bytes()))
    for dist, block in stored["frameworks"].items():
        versions = block["versions"]
        data[dist]["versions"] = versions
        flat = {f"{m}.{n}": v for m, names in block["modules"].items() for n, v in names.items()}
        for table, items in (("names", flat), ("defs", block["defs"])):
            for key, stored_value in items.items():
                data[dist][table][key] = unpack(stored_value, versions)
    return data


def unpack(stored: object, versions: dict) -> dict:
    """{version: value} from a stored value: one value for all versions, or [[versions, value]]."""
    if not isinstance(stored, list):
        return dict.fromkeys(versions, stored)
    return {v: value for names, value in stored for v in names.split()}


def dump(data: dict, path: Path) -> None:
    """Write data compactly: a value shared by every version once, else each with its versions."""
    frameworks = {}
    for dist, block in data.items():
        order = sorted(block["versions"], key=_release)
        modules: dict[str, dict] = {}
        for key in sorted(block["names"]):
            module, _, name = key.rpartition(".")
            modules.setdefault(module, {})[name] = _pack(block["names"][key], order)
        defs = {key: _pack(block["defs"][key], order) for key in sorted(block["defs"])}
        versions = {v: block["versions"][v] for v in order}
        frameworks[dist] = {"versions": versions, "modules": modules, "defs": defs}
    about = "Public APIs of pinned framework wheels; regenerate with tools/record_apis.py."
    document = {"format": FORMAT, "about": about, "frameworks": frameworks}
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, separators=(",", ":")) + "\n"
    # gzip: about 1 MB of JSON is 130 kB; mtime 0 keeps an unchanged record byte-identical.
    path.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))


def _pack(spread: dict, order: list[str]) -> object:
    groups: dict[str, list[str]] = {}
    values = {}
    for version in order:
        if version in spread:
            text = json.dumps(spread[version], sort_keys=True)
            groups.setdefault(text, []).append(version)
            values[text] = spread[version]
    if len(groups) == 1 and len(next(iter(groups.values()))) == len(order):
        return next(iter(values.values()))
    return [[" ".join(versions), values[text]] for text, versions in groups.items()]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="dist==version to record")
    parser.add_argument("--refresh", action="store_true", help="re-record recorded versions")
    parser.add_argument("--wheels", nargs="*", type=Path, default=[], help="folders of wheels")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    sys.setrecursionlimit(20000)  # import chains of large packages run deep
    data = load(args.output)
    wanted = pinned()
    for dist, versions in wanted.items():
        # A version nothing pins any more leaves the record.
        for version in set(data[dist]["versions"]) - set(versions):
            _forget(data[dist], version)
    for dist, versions in wanted.items():
        for version, pinned_by in sorted(versions.items()):
            asked = f"{dist}=={version}"
            if args.only and asked not in args.only:
                continue
            if version in data[dist]["versions"] and not args.refresh:
                data[dist]["versions"][version]["pinned_by"] = pinned_by
                continue
            with tempfile.TemporaryDirectory(prefix="record-apis-") as tmp:
                folders = [*args.wheels, *LOCAL_WHEELS]
                wheel_path = find_wheel(dist, version, folders, Path(tmp))
                if wheel_path is None:
                    print(f"{asked}: no wheel on PyPI for any platform tried; not recorded")
                    data[dist]["versions"].pop(version, None)
                    continue
                print(f"{asked}: reading {wheel_path.name}", flush=True)
                _store(data[dist], version, pinned_by, Wheel(wheel_path), dist)
            dump(data, args.output)
    dump(data, args.output)
    return 0


def _store(block: dict, version: str, pinned_by: list[str], wheel: Wheel, dist: str) -> None:
    _forget(block, version)
    found = record(wheel, dist)
    info = {
        "wheel": wheel.path.name,
        "sha256": hashlib.sha256(wheel.path.read_bytes()).hexdigest(),
        "pinned_by": pinned_by,
        "namespaces": found["namespaces"],
    }
    if dist == "mindspore":
        info["build"] = build_info(wheel)
    block["versions"][version] = info
    for table in ("names", "defs"):
        for key, value in found[table].items():
            block[table].setdefault(key, {})[version] = value


def _forget(block: dict, version: str) -> None:
    block["versions"].pop(version, None)
    for table in ("names", "defs"):
        for spread in block[table].values():
            spread.pop(version, None)
        for key in [k for k, spread in block[table].items() if not spread]:
            del block[table][key]


if __name__ == "__main__":
    sys.exit(main())
