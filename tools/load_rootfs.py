"""Load a root file system into Docker as an image of a given architecture.

`docker import` labels what it imports with the engine's own architecture (dockerd 20.10
takes --platform only in experimental mode), so an aarch64 root made by debootstrap under
emulation would claim to be amd64. `docker load` keeps the image configuration it is given:
this writes the rootfs as one layer of a `docker save` archive whose configuration says
``architecture``, and pipes it to `docker load`.

Usage: python3 tools/load_rootfs.py ROOTFS NAME:TAG ARCH     (ARCH: Docker's name, arm64)
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def load(rootfs: Path, ref: str, arch: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        layer = Path(tmp) / "layer.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(layer), "."], check=True)
        digest = hashlib.sha256()
        with layer.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
        config = {
            "architecture": arch,
            "os": "linux",
            "config": {"Env": [f"PATH={PATH}"], "Cmd": ["/bin/bash"]},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest.hexdigest()}"]},
            "history": [{"created_by": f"debootstrap --arch={arch} (tools/load_rootfs.py)"}],
        }
        blob = json.dumps(config, sort_keys=True).encode()
        name = hashlib.sha256(blob).hexdigest()
        manifest = [{"Config": f"{name}.json", "RepoTags": [ref], "Layers": ["layer/layer.tar"]}]
        archive_path = Path(tmp) / "image.tar"
        with tarfile.open(archive_path, "w") as archive:
            _add(archive, f"{name}.json", blob)
            _add(archive, "manifest.json", json.dumps(manifest).encode())
            archive.add(layer, "layer/layer.tar")
        with archive_path.open("rb") as stream:
            subprocess.run(["docker", "load"], stdin=stream, check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    load(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
