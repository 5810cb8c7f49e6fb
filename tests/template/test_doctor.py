"""`gen doctor` on host trees made of real files (tests/data/doctor), for generated projects.

The engine checks have their own test with a real engine (tests/integration/test_doctor_engines.py);
here DOCKER_HOST names no engine, so that line is always the same ✗.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator import catalog
from generator.doctor import host as checks
from generator.doctor.subject import Subject
from generator.engine.registry import refusal_reason
from generator.render.options import Options
from generator.render.project import render
from generator.shipped.hostcheck import key_values
from tests.unit.test_hostcheck import DATA, npu_smi_that_writes, tree


def doctor(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_HOST": f"unix://{cwd}/no-engine.sock"}
    return subprocess.run(
        [sys.executable, "-m", "generator", "doctor", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def ascend_host(root: Path, driver: str, npu_smi: str) -> Path:
    """An Ascend server's files: devices, the driver's version.info, an npu-smi that would
    write ``root``/../npu-smi-ran if it were ever run, and `npu-smi info` as it printed on
    that server, recorded in npu-smi-info.txt."""
    tree(root, {"usr/local/Ascend/driver/version.info": driver, "npu-smi-info.txt": npu_smi})
    (root / "dev").mkdir()
    for name in ("davinci0", "davinci1", "davinci_manager", "devmm_svm", "hisi_hdc"):
        (root / "dev" / name).touch()
    npu_smi_that_writes(root, root.parent / "npu-smi-ran")
    return root


@pytest.mark.parametrize(
    ("fixture", "line"),
    [
        ("nvidia-proc-version-open", "✓ NVIDIA driver: 565.57.01 >= 520.61.05 for CUDA 11.8"),
        (
            "nvidia-proc-version-closed",
            "✗ NVIDIA driver: 375.74 is older than CUDA 11.8 needs; needed: >= 520.61.05 "
            "(>= 450.80.02 with minor-version compatibility); fix: upgrade the host driver, or "
            "build on an older CUDA (gen image build --catalog-entry)",
        ),
    ],
)
def test_a_cuda_project_on_a_host_tree(tmp_path: Path, fixture: str, line: str) -> None:
    project = render(Options("demo"), tmp_path)
    root = tree(tmp_path / "host", {"proc/driver/nvidia/version": fixture})
    done = doctor(project, "--root", root)
    assert done.returncode == 1  # the engine, at least, is missing
    lines = done.stdout.splitlines()
    assert line in lines
    assert lines[0].startswith("✗ engine: ")
    assert "– GPU architecture: checked inside the image at start-up (torch's arch list)" in lines
    assert (
        "✓ entry files: train.py, eval.py, predict.py, export.py, launch.py, env.sh, config.yaml, "
        "scripts/run_1p.sh, scripts/run_8p.sh" in lines
    )
    assert "– rank table: no rank table for this target" in lines
    data = json.loads(doctor(project, "--root", root, "--json").stdout)
    marks = {"ok": "✓", "fail": "✗", "n/a": "–"}
    assert [f"{marks[c['status']]} {c['name']}: {c['found']}" for c in data] == [
        text.split("; needed: ")[0] for text in lines
    ]


@pytest.mark.parametrize(
    ("npu_smi", "chip_line"),
    [
        ("npu-smi-info-910b.txt", "✓ Ascend chip: {root}/npu-smi-info.txt shows 910b"),
        (
            "npu-smi-info-910-excerpt.txt",
            "✗ Ascend chip: {root}/npu-smi-info.txt shows 910; needed: a 910b (the project's "
            "--chip); fix: run on 910b servers, or gen update --set chip=910",
        ),
    ],
)
def test_an_ascend_project_on_a_server_tree(tmp_path: Path, npu_smi: str, chip_line: str) -> None:
    project = render(Options("demo", target="ascend"), tmp_path)
    root = ascend_host(tmp_path / "host", "ascend-driver-version.info-25.3.rc1", npu_smi)
    done = doctor(project, "--root", str(root))
    lines = done.stdout.splitlines()
    assert "✓ Ascend devices: davinci0, davinci1 and davinci_manager, devmm_svm, hisi_hdc" in lines
    assert f"✓ npu-smi: {root}/usr/local/sbin/npu-smi" in lines
    # The chip from the recorded output; the tree's npu-smi, given to be read, never ran.
    assert chip_line.format(root=root) in lines
    assert not (tmp_path / "npu-smi-ran").exists()
    assert "✓ rank table: rank_table_8p.json: 8 ranks" in lines
    # Where the catalogue's base comes from: the Dockerfile upstream builds it from.
    assert (
        "✓ base source: ascendai/cann:8.5.0-910b-ubuntu22.04-py3.11 (cann8.5.0-910b-ubuntu22.04) "
        "is built from Ascend/cann-container-image@c5a67b3a:cann/8.5.0-910b-ubuntu22.04-py3.11/"
        "Dockerfile"
    ) in lines
    # The project's image is CANN 8.5.0 (innerversion C25): its own record lists C23.
    assert "✓ Ascend driver: CANN 8.5.0 (V100R001C25) lists 25.3.rc1 (V100R001C23)" in lines
    # PROJECT_DIR named from another directory: the same checks (the engine line names the
    # socket, which is per directory here).
    named = doctor(tmp_path, str(project), "--root", str(root))
    assert named.stdout.splitlines()[1:] == lines[1:]


def test_a_mindspore_language_model_is_not_told_to_take_a_chip_it_cannot(tmp_path: Path) -> None:
    # The same checks on a language model's project; its fused attention needs an A2 or A3,
    # so on a 910 server the fix offers no gen update --set chip=910 (which would refuse it).
    options = Options("demo", framework="mindspore", target="ascend", task="lm")
    project = render(options, tmp_path)
    root = ascend_host(
        tmp_path / "host", "ascend-driver-version.info-25.3.rc1", "npu-smi-info-910-excerpt.txt"
    )
    lines = doctor(project, "--root", str(root)).stdout.splitlines()
    (chip,) = [line for line in lines if line.startswith("✗ Ascend chip: ")]
    assert chip == (
        f"✗ Ascend chip: {root}/npu-smi-info.txt shows 910; needed: a 910b (the project's "
        "--chip); fix: run on 910b servers (this project cannot take chip 910: task: lm with "
        "MindSpore on chip 910: the model's fused attention (flash_attention_score) runs on "
        "Atlas A2 and A3 (--chip 910b or 910_93), not on the Ascend 910; choose one of those, "
        "or --target cuda)"
    )
    assert "✓ rank table: rank_table_8p.json: 8 ranks" in lines
    assert any(line.startswith("✓ entry files: train.py, eval.py, predict.py") for line in lines)
    assert "✓ Ascend driver: CANN 8.5.0 (V100R001C25) lists 25.3.rc1 (V100R001C23)" in lines


@pytest.mark.parametrize(
    ("framework", "chip", "driver", "line"),
    [
        # The default MindSpore 910b image is CANN 8.5.0 (C25): driver 25.3.rc1 lists C19..C23,
        # CANN 8.5.0's own record lists C23. hicann/pypto's FAQ gives this pair as working.
        (
            "mindspore",
            "910b",
            "ascend-driver-version.info-25.3.rc1",
            "✓ Ascend driver: CANN 8.5.0 (V100R001C25) lists 25.3.rc1 (V100R001C23)",
        ),
        # The PyTorch 910 image is CANN 8.2.RC1 (C22), which lists 23.0.7 (C15); the driver's
        # own list stops at C15.
        (
            "pytorch",
            "910",
            "ascend-driver-version.info",
            "✓ Ascend driver: CANN 8.2.RC1 (V100R001C22) lists 23.0.7 (V100R001C15)",
        ),
    ],
)
def test_the_toolkit_listing_the_driver_passes_as_it_does_in_the_image(
    tmp_path: Path, framework: str, chip: str, driver: str, line: str
) -> None:
    options = Options("demo", framework=framework, target="ascend", chip=chip)
    project = render(options, tmp_path)
    root = ascend_host(tmp_path / "host", driver, "npu-smi-info-910b.txt")
    assert line in doctor(project, "--root", str(root)).stdout.splitlines()


def test_no_driver_no_devices(tmp_path: Path) -> None:
    project = render(Options("demo", target="ascend"), tmp_path)
    (tmp_path / "empty").mkdir()
    done = doctor(project, "--root", str(tmp_path / "empty"))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert any(line.startswith("✗ Ascend devices: no /dev/davinci*; missing") for line in lines)
    assert any(line.startswith("✗ npu-smi: not found") for line in lines)
    root = tmp_path / "empty"
    assert f"– Ascend chip: no {root}/npu-smi-info.txt (npu-smi is not run under --root)" in lines


def test_outside_a_project_the_target_is_asked_for(tmp_path: Path) -> None:
    done = doctor(tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        "error: outside a project, say which image: --target cuda or --target ascend\n"
    )
    done = doctor(tmp_path, "--target", "cuda", "--root", str(tmp_path))
    assert "– project: not in a project (pass PROJECT_DIR)" in done.stdout.splitlines()
    assert "✗ NVIDIA driver: no NVIDIA driver (no /proc/driver/nvidia/version)" in (
        done.stdout.split("; needed")[0] + "\n" + done.stdout
    )


def test_the_host_and_the_image_judge_a_pair_alike(tmp_path: Path) -> None:
    """One rule: the project's start-up check (scripts/hostcheck.py, reading the toolkit's
    own record in the image) and gen doctor (the catalogue's copy of it) agree."""
    project = render(Options("demo", framework="mindspore", target="ascend"), tmp_path)
    root = ascend_host(
        tmp_path / "host", "ascend-driver-version.info-25.3.rc1", "npu-smi-info-910b.txt"
    )
    image = tree(
        tmp_path / "image",
        {
            "usr/local/Ascend/driver/version.info": "ascend-driver-version.info-25.3.rc1",
            "usr/local/Ascend/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info": (
                "ascend_toolkit_install.info-8.5.0-B232"
            ),
        },
    )
    code = "from src.scaffold.run.hostline import results; import sys; "
    code += (
        "print(next(r.line() for r in results('npu', sys.argv[1]) if r.name == 'Ascend driver'))"
    )
    inside = subprocess.run(
        [sys.executable, "-c", code, image], cwd=project, capture_output=True, text=True
    )
    assert (
        inside.stdout == "✓ Ascend driver: CANN 8.5.0 (V100R001C25) lists 25.3.rc1 (V100R001C23)\n"
    )
    assert inside.stdout.strip() in doctor(project, "--root", str(root)).stdout.splitlines()


def test_the_catalogues_toolkit_lists_are_the_recorded_ones() -> None:
    """doctor.TOOLKIT_LISTS copies real records (tests/data/doctor); every Ascend entry of
    the catalogue has one, but CANN 9.0.0, whose record is not at hand."""
    records = [key_values(path.read_text()) for path in DATA.glob("ascend_toolkit_install.info*")]
    recorded = {r["innerversion"]: r["compatible_version"] for r in records}
    assert checks.TOOLKIT_LISTS == {inner: recorded[inner] for inner in checks.TOOLKIT_LISTS}
    entries = [e for e in catalog.load().entries.values() if e.target == "ascend"]
    unrecorded = {e.cann for e in entries if e.innerversion not in checks.TOOLKIT_LISTS}
    assert unrecorded == {"9.0.0"}


def test_a_pair_neither_record_lists_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Driver 25.3.rc1 (C19..C23) and the CANN 7.0.T10 toolkit (C29, C30, C13, R003C10..11),
    each from a real record, through doctor's own path as if the catalogue offered it."""
    toolkit = key_values((DATA / "ascend_toolkit_install.info").read_text())
    monkeypatch.setitem(
        checks.TOOLKIT_LISTS, toolkit["innerversion"], toolkit["compatible_version"]
    )
    entry = dataclasses.replace(
        catalog.load().default("ascend", "pytorch"),
        cann="7.0.T10",
        innerversion=toolkit["innerversion"],
    )
    root = ascend_host(
        tmp_path / "host", "ascend-driver-version.info-25.3.rc1", "npu-smi-info-910b.txt"
    )
    subject = Subject("ascend", entry, None, None, str(root))
    line = next(
        r.line() for r in checks.ascend_checks(subject, "910b") if r.name == "Ascend driver"
    )
    assert line == (
        "✗ Ascend driver: 25.3.rc1 (V100R001C23) and CANN 7.0.T10 (V100R001C13): neither's "
        "compatible_version lists the other; needed: a driver that lists CANN 7.0.T10, or that it "
        "lists; fix: install the Ascend HDK the CANN release notes pair with it (版本配套), or "
        "choose an image whose CANN this driver lists"
    )


def test_an_unparseable_driver_file_is_named(tmp_path: Path) -> None:
    project = render(Options("demo"), tmp_path)
    root = tree(tmp_path / "host", {"proc/driver/nvidia/version": "NVRM: no module line here\n"})
    lines = doctor(project, "--root", root).stdout.splitlines()
    assert (
        "✗ NVIDIA driver: /proc/driver/nvidia/version is unparseable (no driver version in it); "
        "needed: a driver for CUDA 11.8.0; fix: reinstall the driver (it writes the file), or run "
        "where one is loaded"
    ) in lines


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (
            b'{"version": "1.0", "server_list": [',
            "not valid JSON: Expecting value at line 1 column 36",
        ),
        (b"[]", "the rank table must be a JSON object"),
        (b"\xff\xfe\x00", "not UTF-8 text"),
    ],
)
def test_an_invalid_rank_table_is_one_line(tmp_path: Path, content: bytes, found: str) -> None:
    project = render(Options("demo", target="ascend"), tmp_path)
    (project / "rank_table_8p.json").write_bytes(content)
    done = doctor(project, "--root", str(tmp_path))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert (
        f"✗ rank table: rank_table_8p.json: {found}; needed: a table HCCL accepts; fix: gen "
        "ranktable check, then fix or regenerate it"
    ) in done.stdout.splitlines()


@pytest.mark.parametrize(
    ("ref", "said", "reason"),
    [
        (
            "ascendai/cann:8.5.0-910b-ubuntu22.04-py3.11",
            'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on '
            "10.255.255.53:53: no such host",
            "registry-1.docker.io does not resolve",
        ),
        (
            "127.0.0.1:1/doctor/absent:1",
            'Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused',
            "127.0.0.1:1 is not reachable",
        ),
        (
            "nvidia/cuda:0.0-nothing",
            "errors: denied: requested access to the resource is denied unauthorized: "
            "authentication required",
            "the registry refused: no such repository, or docker login",
        ),
        (
            "quay.io/ascend/cann:nope",
            "manifest unknown: manifest unknown",
            "the registry has no such tag",
        ),
        (
            "registry.local/x:1",
            'Get "https://registry.local/v2/": tls: failed to verify certificate: x509: '
            "certificate signed by unknown authority",
            "registry.local's TLS certificate is not trusted here",
        ),
    ],
)
def test_the_base_image_line_gives_the_registrys_reason_short(
    ref: str, said: str, reason: str
) -> None:
    prefix = f"the Docker engine failed at asking the registry for {ref}: "
    assert refusal_reason(ref, prefix + said) == reason
