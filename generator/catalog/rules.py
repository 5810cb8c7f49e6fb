"""The catalogue's consistency rules: ids, tags, indexes and Pythons that agree."""

from __future__ import annotations

from generator.catalog.model import CHIPS, IMAGE_RE, LABELS, Catalog, Entry, did_you_mean
from generator.render.options import FRAMEWORKS

# Where the CANN bases' Dockerfiles live: the folders of cann/ are the ascendai/cann tags,
# each built for linux/amd64 and linux/arm64 (.github/workflows/build_and_push_cann.yml).
CANN_REPOSITORY = "Ascend/cann-container-image"


def problems(catalog: Catalog) -> list[str]:
    """Every consistency rule the catalogue breaks, one line each (empty when sound)."""
    found = [line for e in catalog.entries.values() for line in _entry_problems(e, catalog)]
    for (target, framework, chip), entry_id in catalog.defaults.items():
        where = f"defaults.{target}.{framework}" + (f".{chip}" if chip else "")
        entry = catalog.entries.get(entry_id)
        if entry is None:
            hint = did_you_mean(entry_id, catalog.entries)
            found.append(f"{where}: no entry {entry_id!r}; {hint}")
        elif entry.target != target or entry.pin(framework) is None or entry.chip != chip:
            what = f"{target} with {framework}" + (f" on chip {chip}" if chip else "")
            found.append(f"{where}: {entry_id} is not a base for {what}")
        elif target == "ascend" and not entry.dockerfile:
            # A default's base must be one the upstream repository builds (both CPUs), so
            # that a user can read and rebuild it.
            found.append(f"{where}: {entry_id} names no dockerfile in {CANN_REPOSITORY}")
    for entry in catalog.entries.values():
        for framework in FRAMEWORKS:
            key = (entry.target, framework, entry.chip)
            if entry.pin(framework) and key not in catalog.defaults:
                where = ".".join(part for part in key if part)
                found.append(f"defaults.{where}: missing, though entries have it")
    return found


def _entry_problems(entry: Entry, catalog: Catalog) -> list[str]:
    where = f"entries.{entry.id}"
    found = []
    if not IMAGE_RE.fullmatch(entry.base) or entry.base.endswith(":latest"):
        found.append(f"{where}.base: {entry.base!r} is not an image reference with a pinned tag")
    if entry.target == "cuda":
        major_minor = str(entry.cuda).split(".")[:2]
        expected_id = f"cuda{'.'.join(major_minor)}-{entry.os}"
        expected_tag = f"{entry.cuda}-cudnn{entry.cudnn}-runtime-{entry.os}"
        os_python = catalog.os_python.get(entry.os)
        if os_python is None:
            found.append(f"{where}.os: {entry.os!r} has no os_python entry")
        elif entry.python not in os_python:
            found.append(f"{where}.python: apt on {entry.os} offers Python {', '.join(os_python)}")
        index = "cu" + "".join(major_minor)
        if entry.pytorch and not entry.pytorch.index_url.rstrip("/").endswith("/" + index):
            found.append(f"{where}.pytorch.index_url: not the {index} index of CUDA {entry.cuda}")
        if entry.pytorch and entry.pytorch.torch_npu:
            found.append(f"{where}.pytorch.torch_npu: only Ascend bases take torch_npu")
    else:
        cann = str(entry.cann).lower()
        expected_id = f"cann{cann}-{entry.chip}-{entry.os}"
        expected_tag = f"{cann}-{entry.chip}-{entry.os}-py{entry.python}"
        if entry.chip not in CHIPS:
            found.append(f"{where}.chip: {entry.chip!r} is not one of {', '.join(CHIPS)}")
        if entry.pytorch:
            npu, torch = entry.pytorch.torch_npu or "", entry.pytorch.torch
            if npu != torch and not npu.startswith(torch + "."):
                found.append(f"{where}.pytorch.torch_npu: must be a build for torch {torch}")
            if not entry.pytorch.index_url.rstrip("/").endswith("/cpu"):
                found.append(f"{where}.pytorch.index_url: Ascend takes torch from the cpu index")
    if entry.id != expected_id:
        found.append(f"{where}: the id of this base is {expected_id}")
    tag = entry.base.rpartition(":")[2]
    if tag != expected_tag:
        found.append(f"{where}.base: tag {tag!r} does not say {expected_tag!r}")
    if entry.dockerfile is not None and entry.target == "ascend":
        # Ascend/cann-container-image keeps each tag's Dockerfile in cann/<tag>/.
        repository, _, path = entry.dockerfile.partition(":")
        if repository.split("@")[0] != CANN_REPOSITORY or path != f"cann/{tag}/Dockerfile":
            found.append(
                f"{where}.dockerfile: {entry.dockerfile!r} is not "
                f"{CANN_REPOSITORY}@<commit>:cann/{tag}/Dockerfile"
            )
    for framework in FRAMEWORKS:
        pin = entry.pin(framework)
        if pin and entry.python not in pin.pythons:
            found.append(
                f"{where}.{framework}.pythons: {LABELS[framework]} {pin.version} is built for "
                f"Python {', '.join(pin.pythons)}, not the base's {entry.python}"
            )
        if pin and pin.index_url is not None and not pin.index_url.startswith("https://"):
            found.append(f"{where}.{framework}.index_url: must be an https:// URL")
    return found
