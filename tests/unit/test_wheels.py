"""Which wheels a dependency build sends: what the requirements need, transitively, for
the image's Python and machine, and nothing else in the wheelhouse."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag

from generator.cache import JsonCache
from generator.image.wheels import (
    Selection,
    WheelFacts,
    compatible,
    read_requires,
    requirement_lines,
    select,
)


def _wheel(folder: Path, filename: str, *requires: str) -> Path:
    """A real (tiny) wheel: a zip with the dist-info METADATA pip reads."""
    name, version = filename.split("-")[:2]
    path = folder / filename
    metadata = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(metadata) + "\n")
    return path


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    _wheel(
        folder,
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "filelock",
        "sympy>=1.13",
        'optree; extra == "optree"',
        'setuptools; python_version >= "3.12"',
    )
    _wheel(folder, "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", "filelock")
    _wheel(folder, "torch-2.13.0-cp311-none-macosx_11_0_arm64.whl")
    _wheel(folder, "filelock-3.0-py3-none-any.whl")
    _wheel(folder, "sympy-1.14.0-py3-none-any.whl", "mpmath<1.4,>=1.1.0")
    _wheel(folder, "mpmath-1.3.0-py3-none-any.whl")
    _wheel(folder, "optree-0.13.0-cp311-cp311-manylinux_2_17_x86_64.whl")
    _wheel(folder, "setuptools-80.0-py3-none-any.whl")
    _wheel(folder, "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    _wheel(folder, "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.whl")
    _wheel(folder, "pyyaml-6.0.3-cp311-cp311-manylinux2014_aarch64.whl")
    _wheel(folder, "protobuf-7.36.2-cp310-abi3-manylinux2014_x86_64.whl")
    _wheel(folder, "mindspore-2.10.0-cp311-cp311-manylinux1_x86_64.whl", "numpy<2", "protobuf")
    (folder / "sentencepiece-0.2.0.tar.gz").write_bytes(b"sdist")
    (folder / "README.txt").write_text("not a distribution")
    return folder


def _names(selection: Selection) -> list[str]:
    return [path.name.split("-")[0] + "-" + path.name.split("-")[1] for path in selection.files]


def test_follows_requires_dist_for_the_image_python_and_machine(wheelhouse: Path) -> None:
    selection = select(
        wheelhouse, ["torch==2.13.0", "numpy"], python="3.11", machine="x86_64", facts=WheelFacts()
    )
    # Not the cp312 or macOS torch, not setuptools (3.12 only), not optree (an extra).
    assert _names(selection) == [
        "filelock-3.0",
        "mpmath-1.3.0",
        "numpy-1.26.4",
        "numpy-2.4.6",
        "sympy-1.14.0",
        "torch-2.13.0+cpu",
    ]
    assert selection.missing == () and not selection.whole


def test_versions_extras_and_markers_narrow_the_choice(wheelhouse: Path) -> None:
    wanted = ["mindspore==2.10.0", "torch[optree]==2.13.0", 'pyyaml; python_version < "3"']
    selection = select(wheelhouse, wanted, python="3.11", machine="x86_64", facts=WheelFacts())
    # MindSpore's numpy<2 takes 1.26 only; the optree extra brings optree; the abi3
    # protobuf (cp310) serves 3.11; pyyaml's marker is false.
    assert _names(selection) == [
        "filelock-3.0",
        "mindspore-2.10.0",
        "mpmath-1.3.0",
        "numpy-1.26.4",
        "optree-0.13.0",
        "protobuf-7.36.2",
        "sympy-1.14.0",
        "torch-2.13.0+cpu",
    ]
    newer = select(wheelhouse, wanted, python="3.12", machine="x86_64", facts=WheelFacts())
    assert _names(newer) == ["filelock-3.0", "torch-2.13.0"]  # the cp312 build
    assert newer.missing == ("mindspore==2.10.0",)  # its only wheel is cp311


def test_what_the_wheelhouse_lacks_is_named_and_sdists_go_by_name(wheelhouse: Path) -> None:
    selection = select(
        wheelhouse,
        ["pyyaml", "sentencepiece", "torch==9.9"],
        python="3.11",
        machine="x86_64",
        facts=WheelFacts(),
    )
    assert _names(selection) == ["sentencepiece-0.2.0.tar.gz"]
    assert selection.missing == ("pyyaml", "torch==9.9")  # pyyaml here is for aarch64 only
    arm = select(wheelhouse, ["pyyaml"], python="3.11", machine="aarch64", facts=WheelFacts())
    assert _names(arm) == ["pyyaml-6.0.3"]


def test_a_line_gen_cannot_follow_sends_the_whole_wheelhouse(wheelhouse: Path) -> None:
    assert requirement_lines("-r other.txt\nnumpy\n") is None
    assert requirement_lines("-e .\n") is None
    assert requirement_lines(
        "# comment\n--extra-index-url https://x\nnumpy  # why\n\npyyaml==6 --hash=sha256:ab\n"
    ) == ["numpy", "pyyaml==6"]
    selection = select(wheelhouse, None, python="3.11", machine="x86_64", facts=WheelFacts())
    assert selection.whole and len(selection.files) == 15  # all but the hidden ones
    broken = select(wheelhouse, ["numpy=="], python="3.11", machine="x86_64", facts=WheelFacts())
    assert broken.whole


@pytest.mark.parametrize(
    ("tag", "ok"),
    [
        (("cp311", "cp311", "manylinux_2_28_x86_64"), True),
        (("cp311", "cp311", "manylinux_2_28_aarch64"), False),
        (("cp312", "cp312", "manylinux_2_28_x86_64"), False),
        (("cp39", "abi3", "manylinux2014_x86_64"), True),
        (("cp312", "abi3", "manylinux2014_x86_64"), False),
        (("py3", "none", "any"), True),
        (("py2", "none", "any"), False),
        (("cp311", "cp311", "musllinux_1_1_x86_64"), False),
        (("cp311", "cp311", "win_amd64"), False),
        (("pp310", "pypy310_pp73", "manylinux_2_17_x86_64"), False),
    ],
)
def test_compatible_tags(tag: tuple[str, str, str], ok: bool) -> None:
    assert compatible(Tag(*tag), (3, 11), "x86_64") is ok


def test_facts_are_read_once_and_again_when_the_file_changes(
    wheelhouse: Path, isolated_home: Path
) -> None:
    path = wheelhouse / "sympy-1.14.0-py3-none-any.whl"
    facts = WheelFacts(JsonCache("wheels"))
    assert facts.requires(path) == read_requires(path) == ["mpmath<1.4,>=1.1.0"]
    digest = facts.digest(path)
    facts.cache.save()
    again = WheelFacts(JsonCache("wheels"))
    assert again.cache.path.is_relative_to(isolated_home)
    assert again.digest(path) == digest and again.requires(path) == ["mpmath<1.4,>=1.1.0"]
    _wheel(wheelhouse, path.name, "mpmath", "six")  # rebuilt: other size, other mtime
    assert again.requires(path) == ["mpmath", "six"] and again.digest(path) != digest


def _elf(machine: int) -> bytes:
    """The 64-byte ELF header of a little-endian 64-bit shared object for ``machine``
    (e_machine: 62 x86_64, 183 aarch64), as every .so in a wheel starts."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # ELFCLASS64, ELFDATA2LSB, version 1
    rest = (3).to_bytes(2, "little") + machine.to_bytes(2, "little") + (1).to_bytes(4, "little")
    return (ident + rest).ljust(64, b"\0")


def binary_wheel(folder: Path, filename: str, machine: int) -> Path:
    """A wheel holding one shared library of ``machine``'s CPU, named as MindSpore names its
    builds on PyPI: cp311-none-any for Linux aarch64, manylinux1_x86_64 for x86_64."""
    path = _wheel(folder, filename, "numpy")
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("mindspore/_c_expression.cpython-311.so", _elf(machine))
    return path


@pytest.mark.parametrize(("machine", "other"), [("x86_64", "aarch64"), ("aarch64", "x86_64")])
def test_a_none_any_wheel_of_another_cpus_libraries_is_never_sent(
    tmp_path: Path, machine: str, other: str
) -> None:
    folder = tmp_path / "wheels"
    folder.mkdir()
    _wheel(folder, "numpy-1.26.4-py3-none-any.whl")
    arm = binary_wheel(folder, "mindspore-2.10.0-cp311-none-any.whl", 183)
    wanted = ["mindspore==2.10.0"]
    facts = WheelFacts()
    assert facts.machine(arm) == "aarch64"
    chosen = select(folder, wanted, python="3.11", machine=machine, facts=facts)
    if machine == "aarch64":  # PyPI's aarch64 build: sent to an aarch64 image
        assert _names(chosen) == ["mindspore-2.10.0", "numpy-1.26.4"] and not chosen.foreign
        return
    # For x86_64 it is the only mindspore: refused, in one line naming the file and both CPUs.
    assert _names(chosen) == [] and chosen.missing == ("mindspore==2.10.0",)
    assert chosen.foreign == (
        "mindspore-2.10.0-cp311-none-any.whl holds aarch64 libraries (a none-any name does "
        "not say so), and this image is for x86_64: put a x86_64 build of mindspore==2.10.0 "
        "in the wheelhouse, or build for aarch64 (--arch aarch64)",
    )
    # With the x86_64 build beside it, that one goes, and the aarch64 one stays behind.
    binary_wheel(folder, "mindspore-2.10.0-cp311-cp311-manylinux1_x86_64.whl", 62)
    both = select(folder, wanted, python="3.11", machine=machine, facts=facts)
    assert [p.name for p in both.files] == [
        "mindspore-2.10.0-cp311-cp311-manylinux1_x86_64.whl",
        "numpy-1.26.4-py3-none-any.whl",
    ] and not both.foreign
    # And the reverse: an aarch64 image never gets an x86_64 none-any wheel.
    (folder / arm.name).unlink()
    x86 = binary_wheel(folder, "mindspore-2.10.0-cp311-none-any.whl", 62)
    reverse = select(folder, wanted, python="3.11", machine=other, facts=facts)
    assert reverse.files == () and reverse.foreign[0].startswith(
        f"{x86.name} holds x86_64 libraries"
    )
