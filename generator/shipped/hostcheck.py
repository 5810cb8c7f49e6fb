"""Can this host (or this container) run the image? Driver, devices and chip, as rules.

Standard library only, Python 3.8+: gen doctor runs it on the host, and each project
ships it as scripts/hostcheck.py so that train.py runs the same check at start-up,
inside the container. Every reader takes a root directory, so that tests (and
``gen doctor --root``) read a copy of /proc, /sys, /dev and /usr/local/Ascend.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from typing import Callable, NamedTuple

OK, FAIL, NA = "ok", "fail", "n/a"
MARKS = {OK: "✓", FAIL: "✗", NA: "–"}

NVIDIA_PROC = "proc/driver/nvidia/version"
NVIDIA_SYS = "sys/module/nvidia/version"
ASCEND_DRIVER_INFO = "usr/local/Ascend/driver/version.info"
# The toolkit's own record: <=8.3 under ascend-toolkit/latest, from 8.5 under cann/.
TOOLKIT_INFOS = (
    "usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info",
    "usr/local/Ascend/cann/*-linux/ascend_toolkit_install.info",
    "usr/local/Ascend/cann-*/*-linux/ascend_toolkit_install.info",
)
NPU_SMI = ("usr/local/sbin/npu-smi", "usr/local/bin/npu-smi")
# Under a --root other than /, `npu-smi info`'s output as recorded on the server
# (npu-smi info > npu-smi-info.txt): a tree given to be read is never run.
NPU_SMI_RECORD = "npu-smi-info.txt"
# The nodes an Ascend container needs beside /dev/davinciN (ascend-docker-runtime's
# runtime/main.go: the manager, memory management and host-device channel).
ASCEND_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
# `npu-smi info` names; a bare 910B is the first 910 (vllm-ascend's SOC_TO_SHORT_SOC_MAP).
CHIP_PATTERNS = (
    ("910_93", re.compile(r"^(?:Ascend)?910_93\d\d$|^Ascend910$")),
    ("910b", re.compile(r"^(?:Ascend)?910B\d")),
    ("910", re.compile(r"^(?:Ascend)?910(?:A|B|ProA|ProB|PremiumA)?$")),
)
VERSION_RE = re.compile(r"\d+(?:\.\d+)+")
INNER_RE = re.compile(r"V\d{3}R\d{3}C\d{2}")


class Result(NamedTuple):
    """One check: its name, OK/FAIL/NA, what was found, and (on FAIL) what is needed and
    how to get there."""

    name: str
    status: str
    found: str
    needed: str = ""
    fix: str = ""

    def line(self) -> str:
        text = f"{MARKS[self.status]} {self.name}: {self.found}"
        if self.status == FAIL:
            text += f"; needed: {self.needed}; fix: {self.fix}"
        return text

    def as_dict(self) -> dict[str, str]:
        return dict(self._asdict())


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def read(root: str, name: str) -> str | None:
    """The text of ``name`` under ``root``, None when it cannot be read."""
    try:
        with open(os.path.join(root, name), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def nvidia_driver(root: str = "/") -> str | None:
    """The NVIDIA kernel module's version (closed or open module), None without one."""
    text = read(root, NVIDIA_PROC)
    if text:
        # "... Kernel Module  535.161.08  ..." or "... Open Kernel Module for x86_64  565.57.01"
        match = re.search(r"Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
        if match:
            return match.group(1)
    text = read(root, NVIDIA_SYS)
    return text.strip() if text and VERSION_RE.fullmatch(text.strip()) else None


def nvidia_driver_problem(root: str = "/") -> str:
    """Why nvidia_driver(root) found no version: a file that is there but cannot be read
    or holds no version is named as such; only when neither file exists is there no driver."""
    for name in (NVIDIA_PROC, NVIDIA_SYS):
        path = os.path.join(root, name)
        if os.path.lexists(path):
            text = read(root, name)
            what = "unreadable" if text is None else "unparseable (no driver version in it)"
            return f"/{name} is {what}"
    return f"no NVIDIA driver (no /{NVIDIA_PROC})"


def cuda_driver_check(
    driver: str | None, cuda: str, table: dict[str, dict[str, str]], root: str | None = None
) -> Result:
    """The driver against the image's CUDA: the toolkit's minimum, else the major's
    minor-version-compatibility minimum (PTX JIT and newer-driver APIs then fail). With
    ``root``, a missing version says why (nvidia_driver_problem)."""
    name = "NVIDIA driver"
    if driver is None:
        found = (
            nvidia_driver_problem(root) if root is not None else "no NVIDIA driver version found"
        )
        return Result(
            name,
            FAIL,
            found,
            f"a driver for CUDA {cuda}",
            "install the NVIDIA driver, or run where one is"
            if found.startswith("no NVIDIA driver")
            else "reinstall the driver (it writes the file), or run where one is loaded",
        )
    release = ".".join(cuda.split(".")[:2])
    full = table.get("toolkit", {}).get(release)
    compat = table.get("minor_compat", {}).get(cuda.split(".")[0])
    if full and version_tuple(driver) >= version_tuple(full):
        return Result(name, OK, f"{driver} >= {full} for CUDA {release}")
    if compat and version_tuple(driver) >= version_tuple(compat):
        return Result(
            name,
            OK,
            f"{driver} runs CUDA {release} by minor-version compatibility "
            f"(>= {compat}; PTX JIT and newer-driver APIs need >= {full})",
        )
    needed = full or compat or "?"
    return Result(
        name,
        FAIL,
        f"{driver} is older than CUDA {release} needs",
        f">= {needed} (>= {compat} with minor-version compatibility)" if compat else f">= {needed}",
        "upgrade the host driver, or build on an older CUDA (gen image build --catalog-entry)",
    )


def arch_check(capability: tuple[int, int], arch_list: list[str]) -> Result:
    """A GPU's compute capability against a torch build's arch list: a cubin of the same
    major and a lower or equal minor runs; else PTX of a lower capability is JIT-compiled."""
    name = "GPU architecture"
    major, minor = capability
    cubins = [version_tuple(a) for a in arch_list if a.startswith("sm_")]
    ptx = [version_tuple(a) for a in arch_list if a.startswith("compute_")]

    def cap(v: tuple[int, ...]) -> tuple[int, int]:
        return (v[0] // 10, v[0] % 10) if len(v) == 1 else (v[0], v[1])

    found = f"sm_{major}{minor} against {' '.join(arch_list) or 'no arch list'}"
    if any(cap(v)[0] == major and cap(v)[1] <= minor for v in cubins):
        return Result(name, OK, found)
    if any(cap(v) <= (major, minor) for v in ptx):
        return Result(name, OK, found + " (by PTX JIT: the first start compiles kernels)")
    return Result(
        name,
        FAIL,
        found,
        f"a torch built for sm_{major}x",
        "choose a torch build (catalogue entry) that lists this GPU's architecture",
    )


def key_values(text: str) -> dict[str, str]:
    """``key=value`` lines (version.info, *_install.info)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def compatible(inner: str, listed: str) -> bool:
    """Whether ``inner`` (V100R001C23...) is in a compatible_version list: [X],[X,Y]..."""
    mine = INNER_RE.match(inner)
    if not mine:
        return False
    for group in re.findall(r"\[([^\]]*)\]", listed):
        bounds = [b.strip() for b in group.split(",") if b.strip()]
        if len(bounds) == 1 and mine.group(0) == bounds[0][:11]:
            return True
        if len(bounds) == 2 and bounds[0][:8] == mine.group(0)[:8]:
            # A range within one VxxxRxxx, compared as whole tokens of equal length.
            if bounds[0][:11] <= mine.group(0) <= bounds[1][:11]:
                return True
    return False


# The Ascend rule, one for gen doctor and the start-up check. Each package records the
# releases it works with: the driver's version.info and the CANN toolkit's
# ascend_toolkit_install.info both carry an innerversion and a compatible_version list, the
# two files Ascend DMI's "NPU driver and CANN compatibility" check reads (MindCluster
# toolbox guide, hiascend.com: "Software and Hardware Compatibility Test", toolboxug_0022;
# "Innerversion is NA ...", toolboxug_0111). The newer package holds the list: driver
# 25.3.rc1 lists C19..C23, not CANN 8.5.0's C25 (its version.info as printed in
# hicann/pypto's FAQ "CANN包不兼容", docs/zh/tutorials/appendix/faq/
# cann-package-incompatible.md, which shows it meeting "driver >= 25.2.0, CANN >= 8.5.0"),
# while 8.5.0's toolkit lists C23 (its record in vllm-project/vllm-ascend issue #6271).
# So: compatible when either record lists the other; when neither does, not.
def ascend_compatible(driver: dict[str, str], toolkit: dict[str, str]) -> str:
    """Which record lists the other ("driver" or "toolkit"), "" when neither does."""
    if compatible(toolkit.get("innerversion", ""), driver.get("compatible_version", "")):
        return "driver"
    if compatible(driver.get("Innerversion", ""), toolkit.get("compatible_version", "")):
        return "toolkit"
    return ""


def cann_check(driver_info: str | None, toolkit_info: str | None, cann: str, inner: str) -> Result:
    """The Ascend driver against a CANN toolkit by ascend_compatible. ``toolkit_info`` is
    the toolkit's record (``inner`` stands in for its innerversion without one); without
    its compatible_version, a driver that does not list it is not judged here."""
    name = "Ascend driver"
    if driver_info is None:
        return Result(
            name,
            FAIL,
            f"no /{ASCEND_DRIVER_INFO}",
            f"a driver for CANN {cann}",
            "install the Ascend HDK driver (or mount /usr/local/Ascend/driver)",
        )
    driver = key_values(driver_info)
    toolkit = key_values(toolkit_info or "")
    toolkit.setdefault("innerversion", inner)
    inner = toolkit["innerversion"][:11]
    if not inner:
        return Result(name, NA, f"no innerversion known for CANN {cann}: checked in the image")
    mine = f"{driver.get('Version', '?')} ({driver.get('Innerversion', '?')[:11]})"
    theirs = f"CANN {cann} ({inner})"
    lister = ascend_compatible(driver, toolkit)
    if lister:
        listed = f"{mine} lists {theirs}" if lister == "driver" else f"{theirs} lists {mine}"
        return Result(name, OK, listed)
    if "compatible_version" not in toolkit:
        return Result(
            name, NA, f"{mine} does not list {theirs}, whose own list is checked in the image"
        )
    return Result(
        name,
        FAIL,
        f"{mine} and {theirs}: neither's compatible_version lists the other",
        f"a driver that lists CANN {cann}, or that it lists",
        "install the Ascend HDK the CANN release notes pair with it (版本配套), "
        "or choose an image whose CANN this driver lists",
    )


def ascend_devices(root: str = "/") -> Result:
    name = "Ascend devices"
    davinci = sorted(
        os.path.basename(p) for p in glob.glob(os.path.join(root, "dev", "davinci[0-9]*"))
    )
    missing = [n for n in ASCEND_NODES if not os.path.exists(os.path.join(root, "dev", n))]
    if davinci and not missing:
        return Result(name, OK, f"{', '.join(davinci)} and {', '.join(ASCEND_NODES)}")
    found = ", ".join(davinci) or "no /dev/davinci*"
    return Result(
        name,
        FAIL,
        found + (f"; missing {', '.join(missing)}" if missing else ""),
        f"/dev/davinciN and {', '.join(ASCEND_NODES)}",
        "install the driver; in a container pass the devices (README: Run the image)",
    )


def npu_smi(root: str = "/") -> str | None:
    """npu-smi's path under ``root`` when it is there (found, never run, by this)."""
    paths = (os.path.join(root, name) for name in NPU_SMI)
    return next((path for path in paths if os.access(path, os.X_OK)), None)


def chip_of(info: str) -> str | None:
    """The chip (910, 910b, 910_93) `npu-smi info` shows in its first device row."""
    for line in info.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        words = cells[0].split() if cells else []
        if len(words) == 2 and words[0].isdigit():
            for chip, pattern in CHIP_PATTERNS:
                if pattern.search(words[1]):
                    return chip
    return None


def is_host(root: str) -> bool:
    """Whether ``root`` is this machine's own / (the only root whose programs are run)."""
    return os.path.realpath(root) == os.path.realpath("/")


def npu_smi_info(root: str = "/") -> tuple[str | None, str]:
    """`npu-smi info`'s output and where it came from (None and why when there is none).
    Under / the tool is run; under any other root only NPU_SMI_RECORD is read."""
    if not is_host(root):
        record = os.path.join(root, NPU_SMI_RECORD)
        text = read(root, NPU_SMI_RECORD)
        if text is None:
            return None, f"no {record} (npu-smi is not run under --root)"
        return text, record
    tool = npu_smi(root)
    if tool is None:
        return None, "no npu-smi"
    try:
        done = subprocess.run([tool, "info"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"npu-smi info failed ({err})"
    return done.stdout, "npu-smi"


def chip_check(
    root: str, wanted: str, refused: Callable[[str], str | None] = lambda chip: None
) -> Result:
    """The chip npu-smi shows against the project's; ``refused(chip)`` says why the project
    cannot take the chip shown instead (a fix not to offer), or None."""
    name = "Ascend chip"
    info, source = npu_smi_info(root)
    if info is None:
        if not is_host(root):
            return Result(name, NA, source)
        return Result(
            name,
            FAIL,
            source,
            "npu-smi info (the driver installs npu-smi)",
            "install the Ascend driver; in a container mount /usr/local/bin/npu-smi",
        )
    chip = chip_of(info)
    if chip == wanted:
        return Result(name, OK, f"{source} shows {chip}")
    why = refused(chip) if chip else None
    fix = f"run on {wanted} servers, or gen update --set chip={chip}"
    if why:
        fix = f"run on {wanted} servers (this project cannot take chip {chip}: {why})"
    found = f"{source} shows {chip or 'no chip it names'}"
    needed = f"a {wanted} (the project's --chip)"
    return Result(name, FAIL, found, needed, fix if chip else "check npu-smi info")


def toolkit_info(root: str = "/") -> str | None:
    for pattern in TOOLKIT_INFOS:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            text = read(root, os.path.relpath(path, root))
            if text:
                return text
    return None
