"""Benchmark image builds on a real engine: gen's two-step build (a cached dependency
image, then the code FROM it) against the single build of the whole Dockerfile with the
wheelhouse in its context (what gen did before, and what `docker build -f Dockerfile.cuda .`
does), both measured in this run.

For each: the cold build, the warm rebuild after a train.py edit (seconds, and % of its
cold build) and the bytes sent to the engine. The wheelhouse is ~1 GB and mixed: the
torch CPU wheel, MindSpore, and what both need (numpy, pyyaml, scipy...). Offline, on the
stand-in base from tools/docker_up.sh. Targets (issue #13): warm rebuild <= 3 s and
<= 5% of cold; unchanged requirements send no wheel.

    python bench/bench_images.py [--framework pytorch|mindspore]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator import engine  # noqa: E402
from generator.image.context import code_files, pack  # noqa: E402
from generator.render.options import Options  # noqa: E402
from generator.render.project import render  # noqa: E402
from tests.integration.conftest import PINS, STANDIN_BASE, wheelhouse_for  # noqa: E402

MB = 1e6


def mixed_wheelhouse(dest: Path) -> Path:
    """Links to every wheel of both frameworks' wheelhouses: about 1 GB."""
    for framework in PINS:
        for wheel in wheelhouse_for(framework).glob("*.whl"):
            if not (dest / wheel.name).exists():
                (dest / wheel.name).symlink_to(wheel)
    return dest


def gen_build(project: Path, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run `gen image build`; return its wall time and the MB it sent."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "generator", "image", "build", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"gen image build failed:\n{result.stderr[-3000:]}")
    units = {"kB": 1e3, "MB": 1e6}
    sent = re.findall(r"context ([\d.]+) (kB|MB)", result.stdout)
    return seconds, sum(float(n) * units[unit] for n, unit in sent) / MB


def whole_build(docker: engine.Engine, project: Path, wheels: Path, args: dict, nocache: bool):
    """The whole Dockerfile in one build, the wheelhouse in the context; (seconds, MB)."""
    start = time.perf_counter()
    files = {**code_files(project), **{f"wheelhouse/{w.name}": w for w in wheels.iterdir()}}
    context = pack((project / "Dockerfile.cuda").read_text(), files)
    with open(os.devnull, "w") as log, context.fileobj:
        spec = engine.BuildSpec("benchimg:baseline", args, nocache)
        docker.build(context, spec, log, lambda _: None)
    return time.perf_counter() - start, context.size / MB


def edit(project: Path, note: str) -> None:
    train = project / "train.py"
    train.write_text(train.read_text() + f"\n# {note}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(PINS), default="pytorch")
    args = parser.parse_args()
    subprocess.run(["bash", str(REPO / "tools" / "docker_up.sh")], check=True, capture_output=True)
    docker = engine.connect()
    before = docker.image_ids()
    pin = PINS[args.framework]
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp:
        root = Path(tmp)
        (root / "wheels").mkdir()
        wheels = mixed_wheelhouse(root / "wheels")
        wheel_mb = sum(w.stat().st_size for w in wheels.iterdir()) / MB
        project = render(Options("benchimg", framework=args.framework, target="cuda"), root)
        for path in (project / "data" / "big.bin", project / "output" / "old.pt"):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as handle:
                handle.truncate(1 << 29)  # 1 GB of data and outputs that must not be sent
        build_args = {
            "BASE_IMAGE": STANDIN_BASE,
            "PYTHON": "python3",
            "FRAMEWORK": pin,
            "PIP_NO_INDEX": "1",
        }
        gen_args = ["--target", "cuda", "--base-image", STANDIN_BASE, "--wheelhouse", str(wheels)]
        gen_args += ["--build-arg", f"FRAMEWORK={pin}"]
        # A fresh cache: the cold build reads and hashes the wheels it needs.
        env = {"XDG_CACHE_HOME": str(root / "cache")}
        try:
            base_cold = whole_build(docker, project, wheels, build_args, nocache=True)
            edit(project, "baseline edit")
            base_warm = whole_build(docker, project, wheels, build_args, nocache=False)
            gen_cold = gen_build(project, [*gen_args, "--no-cache"], env)
            edit(project, "gen edit")
            gen_warm = gen_build(project, gen_args, env)
        finally:
            docker.remove_images(docker.image_ids() - before)
    report(args.framework, wheel_mb, base_cold, base_warm, gen_cold, gen_warm)


def report(framework: str, wheel_mb: float, *rows: tuple[float, float]) -> None:
    base_cold, base_warm, gen_cold, gen_warm = rows
    print(f"{framework} image (cuda) on {STANDIN_BASE}; mixed wheelhouse {wheel_mb:.0f} MB")
    header = ("build", "cold s", "warm s", "warm/cold", "sent cold MB", "sent warm MB")
    print("".join(f"{h:>14}" for h in header))
    for name, cold, warm in (
        ("whole (before)", base_cold, base_warm),
        ("gen two-step", gen_cold, gen_warm),
    ):
        print(
            f"{name:>14}{cold[0]:>14.1f}{warm[0]:>14.2f}{warm[0] / cold[0]:>14.1%}"
            f"{cold[1]:>14.1f}{warm[1]:>14.2f}"
        )
    print(
        f"warm rebuild: {gen_warm[0]:.2f} s, {gen_warm[0] / gen_cold[0]:.1%} of cold "
        f"(target <= 3 s and <= 5%); {base_warm[0] / gen_warm[0]:.1f}x faster than before"
    )
    print(
        f"sent on the warm rebuild: {gen_warm[1] * 1e3:.0f} kB vs {base_warm[1]:.0f} MB before "
        f"({base_warm[1] / max(gen_warm[1], 1e-3):.0f}x less); cold: "
        f"{gen_cold[1]:.0f} MB vs {base_cold[1]:.0f} MB (only the wheels the pin needs)"
    )


if __name__ == "__main__":
    main()
