"""The CPU an image is built for: names, the engine's own, emulation, the base's.

Ascend training servers (Atlas 800T A2, Atlas 900, A3) and OpenI's and ModelArts' Ascend
pools run aarch64 (Kunpeng) CPUs, so an image built on an x86_64 laptop must be built for
aarch64 to start there. An engine builds for another CPU by running that CPU's programs
under QEMU: the kernel's binfmt_misc hands them to qemu-user-static, registered with the
F flag so that the interpreter is opened once and works inside containers (Debian's
qemu-user-static registers it so: /usr/share/binfmts/qemu-aarch64 says "fix_binary yes").
Sources: the servers' CPUs, Huawei's Atlas 800T A2 and Atlas 900 A2/A3 product pages
(Kunpeng 920); MindCluster's node label host-arch (huawei-arm, huawei-x86) for the same
split on Kubernetes (Ascend/mind-cluster docs/en/scheduling/api/k8s.md).
"""

from __future__ import annotations

import os
import platform as host
from pathlib import Path

from generator.engine.types import ImageInfo
from generator.errors import GenError

ARCHES = ("aarch64", "x86_64")
# Docker's names (image configurations, --platform) for the kernel's.
DOCKER = {"aarch64": "arm64", "x86_64": "amd64"}
KERNEL = {**{v: k for k, v in DOCKER.items()}, "aarch64": "aarch64", "x86_64": "x86_64"}
BINFMT = Path("/proc/sys/fs/binfmt_misc")
LABEL = "io.train-template.arch"
ENABLE = (
    "apt-get install -y qemu-user-static binfmt-support "
    "(mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc first if that is empty)"
)


class EmulationMissing(GenError):
    """Raised when an image for another CPU is asked for and this host cannot run its
    programs: the build's RUN steps would fail with "exec format error"."""


def kernel_name(name: str) -> str:
    """aarch64 or x86_64 for any spelling Docker or the kernel uses (arm64, amd64)."""
    return KERNEL.get(name, name)


def docker_platform(arch: str) -> str:
    """``linux/arm64`` for aarch64: what the engine's build and pull take."""
    return f"linux/{DOCKER.get(arch, arch)}"


def image_arch(image: ImageInfo) -> str:
    """The CPU an image was built for: gen's label, else the engine's record."""
    return kernel_name(image.labels.get(LABEL) or image.architecture)


def engine_is_local() -> bool:
    """Whether the engine runs on this machine (its binfmt_misc is this kernel's)."""
    where = os.environ.get("DOCKER_HOST", "")
    return not where or where.startswith("unix://")


def check_emulation(arch: str, engine_arch: str, binfmt: Path = BINFMT) -> str:
    """Nothing when the engine runs ``arch`` natively; else the emulator that runs it
    ("qemu-aarch64"). EmulationMissing, with how to enable it, when there is none on a
    local engine; a remote engine's kernel cannot be read from here and is trusted."""
    engine_arch = kernel_name(engine_arch)
    if arch == engine_arch:
        return ""
    name = f"qemu-{arch}"
    if not engine_is_local():
        return name
    entry = binfmt / name
    try:
        text = entry.read_text(encoding="utf-8")
    except OSError:
        raise EmulationMissing(
            f"an {arch} image needs {arch} programs run on this {engine_arch} host, and no "
            f"emulator is registered ({entry} is missing): {ENABLE}; or build on an {arch} "
            f"machine, or pass --arch {engine_arch}"
        ) from None
    lines = text.splitlines()
    flags = next((line.split(":", 1)[1] for line in lines if line.startswith("flags:")), "")
    if not lines or lines[0].strip() != "enabled" or "F" not in flags:
        state = "disabled" if lines and lines[0].strip() != "enabled" else "without the F flag"
        raise EmulationMissing(
            f"{entry} is registered {state}, so containers cannot run {arch} programs: "
            f"update-binfmts --enable {name}, or reinstall qemu-user-static (it registers "
            "with the F flag)"
        )
    return name


def check_base(base: ImageInfo, ref: str, arch: str) -> None:
    """Refuse a base image built for another CPU than the image asked for."""
    found = kernel_name(base.architecture)
    if found != arch:
        raise GenError(
            f"{ref} is an image for {found}, and this build is for {arch}: pull the {arch} "
            f"one (docker pull --platform {docker_platform(arch)} {ref}) or pass --base-image "
            f"with an {arch} image, or --arch {found}"
        )


def host_arch() -> str:
    """This machine's CPU, as the kernel names it."""
    return kernel_name(host.machine())
