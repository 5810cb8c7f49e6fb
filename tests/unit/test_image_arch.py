"""The CPU an image is built for: names, the project's answer, and the emulator check read
from a binfmt_misc directory as the kernel writes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.engine.types import ImageInfo
from generator.errors import GenError
from generator.image import arch
from generator.render.options import Options, validate

# /proc/sys/fs/binfmt_misc/qemu-aarch64 as Debian's qemu-user-static registers it.
REGISTERED = """enabled
interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P
flags: {flags}
offset 0
magic 7f454c460201010000000000000000000200b700
mask ffffffffffffff00fffffffffffffffffeffffff
"""


def test_the_project_answer_defaults_per_target() -> None:
    assert Options("p").image_arch("ascend") == "aarch64"
    assert Options("p").image_arch("cuda") == "x86_64"
    assert Options("p", arch="x86_64").image_arch("ascend") == "x86_64"
    assert Options("p", arch="aarch64").image_arch("cuda") == "aarch64"
    assert validate({"project": "p"}).arch == "auto"
    with pytest.raises(GenError, match="arch: 'arm' is not allowed; choose one of auto"):
        validate({"project": "p", "arch": "arm"})


def test_docker_and_kernel_names() -> None:
    assert arch.docker_platform("aarch64") == "linux/arm64"
    assert arch.docker_platform("x86_64") == "linux/amd64"
    assert arch.kernel_name("arm64") == arch.kernel_name("aarch64") == "aarch64"
    labelled = ImageInfo("sha256:1", 1, labels={arch.LABEL: "aarch64"}, architecture="amd64")
    assert arch.image_arch(labelled) == "aarch64"  # gen's label wins over an import's record
    assert arch.image_arch(ImageInfo("sha256:2", 1, architecture="arm64")) == "aarch64"


def test_the_emulator_must_be_registered_enabled_with_flag_f(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert arch.check_emulation("x86_64", "x86_64", tmp_path) == ""  # native: nothing needed
    with pytest.raises(arch.EmulationMissing, match="apt-get install -y qemu-user-static"):
        arch.check_emulation("aarch64", "x86_64", tmp_path)
    entry = tmp_path / "qemu-aarch64"
    entry.write_text(REGISTERED.format(flags="OCF"))
    assert arch.check_emulation("aarch64", "x86_64", tmp_path) == "qemu-aarch64"
    entry.write_text(REGISTERED.format(flags="P"))  # without F: containers cannot open it
    with pytest.raises(arch.EmulationMissing, match="registered without the F flag"):
        arch.check_emulation("aarch64", "x86_64", tmp_path)
    entry.write_text("disabled\n" + REGISTERED.split("\n", 1)[1].format(flags="F"))
    with pytest.raises(arch.EmulationMissing, match="registered disabled"):
        arch.check_emulation("aarch64", "amd64", tmp_path)
    # A remote engine's kernel cannot be read from here: trusted.
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")
    assert arch.check_emulation("aarch64", "x86_64", tmp_path / "none") == "qemu-aarch64"


def test_a_base_of_another_cpu_is_refused() -> None:
    base = ImageInfo("sha256:1", 1, architecture="amd64")
    arch.check_base(base, "b:1", "x86_64")
    with pytest.raises(GenError, match="b:1 is an image for x86_64, and this build is for aarch64"):
        arch.check_base(base, "b:1", "aarch64")
