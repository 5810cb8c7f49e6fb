"""Benchmark the generated Dockerfiles on a real engine: cold build, warm rebuild after a
train.py edit, what the image adds beyond base + framework, build context, smoke time.

Runs offline like the tests: the stand-in base from tools/docker_up.sh and a wheelhouse
of the local torch wheel. Targets (issue #4): warm rebuild <= 5 s and <= 10% of cold;
own layers <= 30 MB; context with 1 GB of data <= 1 MB; smoke <= 30 s per target.

    python bench/bench_images.py [--framework pytorch|mindspore]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator import engine  # noqa: E402
from generator.options import Options  # noqa: E402
from generator.project import render  # noqa: E402
from tests.integration.conftest import PINS, STANDIN_BASE, build_args, wheelhouse_for  # noqa: E402

MB = 1e6


def gen(*args: str, cwd: Path) -> float:
    """Run gen; return its wall time."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "generator", *args], cwd=cwd, capture_output=True, text=True
    )
    if result.returncode != 0:
        sys.exit(f"gen {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


def own_bytes(image: engine.ImageInfo, base: engine.ImageInfo) -> int:
    """Bytes the image adds beyond the base and the framework (the Python and venv layers)."""
    added = image.layers[: len(image.layers) - len(base.layers)]
    framework = [
        size for created_by, size in added if "/opt/venv" in created_by or "apt-get" in created_by
    ]
    return sum(size for _, size in added) - sum(framework)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(PINS), default="pytorch")
    args = parser.parse_args()
    subprocess.run(["bash", str(REPO / "tools" / "docker_up.sh")], check=True, capture_output=True)
    docker = engine.connect()
    base = docker.require_image(STANDIN_BASE, "run tools/docker_up.sh")
    wheels = wheelhouse_for(args.framework)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp:
        project = render(Options("benchimg", framework=args.framework, target="both"), Path(tmp))
        # 1 GB of data and outputs that must not reach the daemon.
        for path in (project / "data" / "big.bin", project / "output" / "old.pt"):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as handle:
                handle.truncate(1 << 29)
        context = engine.build_context(project, "Dockerfile.cuda", {}).seek(0, 2)
        before = docker.image_ids()
        try:
            for target in ("cuda", "ascend"):
                common = ["--target", target, *build_args(args.framework, wheels)]
                cold = gen("image", "build", *common, "--no-cache", cwd=project)
                train = project / "train.py"
                train.write_text(train.read_text() + f"\n# edited for the {target} rebuild\n")
                warm = gen("image", "build", *common, cwd=project)
                image = docker.require_image(f"benchimg:{target}-local", "")
                smoke = gen("image", "smoke", "--target", target, cwd=project)
                rows.append((target, cold, warm, image.size, own_bytes(image, base), smoke))
        finally:
            docker.remove_images(docker.image_ids() - before)

    print(f"{args.framework} images on {STANDIN_BASE} (stand-in base), offline wheelhouse")
    print(f"build context with 1 GB of data and outputs: {context / 1e3:.1f} kB (target <= 1 MB)")
    header = ("target", "cold s", "warm s", "warm/cold", "image MB", "own MB", "smoke s")
    print("".join(f"{h:>11}" for h in header))
    for target, cold, warm, size, own, smoke in rows:
        print(
            f"{target:>11}{cold:>11.1f}{warm:>11.1f}{warm / cold:>11.1%}"
            f"{size / MB:>11.1f}{own / MB:>11.2f}{smoke:>11.1f}"
        )
    print("targets: warm <= 5 s and <= 10% of cold; own layers <= 30 MB; smoke <= 30 s")


if __name__ == "__main__":
    main()
