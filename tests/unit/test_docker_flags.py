"""`docker run`'s options per accelerator: one source for gen image smoke and the README."""

from __future__ import annotations

from generator.devices.flags import run_flags
from generator.devices.host import ASCEND_MOUNTS, detect


def test_gpus_come_through_the_nvidia_runtime() -> None:
    assert run_flags("cuda", 8) == ["--gpus all --shm-size=8g"]


def test_npus_are_device_nodes_with_the_drivers_files_and_group() -> None:
    shm, *lines = run_flags("ascend", 6)
    # Loader workers and HCCL share memory through /dev/shm: Docker's 64 MB would not do.
    assert shm == "--shm-size=8g"
    assert lines[0].split() == [f"--device=/dev/davinci{n}" for n in range(4)]
    assert lines[1].split() == ["--device=/dev/davinci4", "--device=/dev/davinci5"]
    assert (
        lines[2] == "--device=/dev/davinci_manager --device=/dev/devmm_svm --device=/dev/hisi_hdc"
    )
    mounts = " ".join(lines[3:-1]).split()
    assert "/usr/local/Ascend/add-ons:/usr/local/Ascend/add-ons:ro" in mounts
    assert mounts == [w for path in ASCEND_MOUNTS for w in ("-v", f"{path}:{path}:ro")]
    assert lines[-1] == '--group-add "$(stat -c %g /dev/davinci_manager)"'


def test_smoke_mounts_what_the_readme_mounts(tmp_path) -> None:
    # gen image smoke gives a container the same driver paths, where the host has them.
    for path in ASCEND_MOUNTS:
        (tmp_path / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path.lstrip("/")).touch()
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "davinci0").touch()
    assert detect(set(), tmp_path / "dev", tmp_path).mounts == list(ASCEND_MOUNTS)
