"""What an image smoke test runs inside the container, and how its result is judged."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from generator.engine import Accelerators, Engine, Lines
from generator.errors import ContainerFailed

OUTPUT_IN_CONTAINER = "/output"
RECORD_FILES = ("hparams.json", "metrics.jsonl", "artifacts.json")
CHECKPOINT_GLOBS = ("*.pt", "*.ckpt")

# First an environment report, so a failure shows what the image holds and sees.
REPORT = {
    "pytorch": """\
import platform, torch
print("env: python", platform.python_version(), "torch", torch.__version__)
print("env: cuda devices", torch.cuda.device_count() if torch.cuda.is_available() else 0)
try:
    import torch_npu
    print("env: torch_npu", torch_npu.__version__, "npu devices", torch.npu.device_count())
except Exception as err:
    print("env: NPU stack absent:", type(err).__name__, err)
""",
    "mindspore": """\
import platform, mindspore
print("env: python", platform.python_version(), "mindspore", mindspore.__version__)
for target in ("Ascend", "GPU"):
    try:
        count = mindspore.hal.device_count(target)
    except Exception as err:
        count = f"absent ({type(err).__name__})"
    print("env:", target, "devices", count)
""",
}


@dataclass(frozen=True)
class SmokeResult:
    """A passed smoke test: where it ran, what the report said and what it wrote."""

    tag: str
    accelerators: str
    report: list[str]
    outputs: list[str]
    output_dir: Path


def command(framework: str) -> list[str]:
    """The container command: the report, then one short training run."""
    train = f"python train.py --smoke --device_target auto --train_url {OUTPUT_IN_CONTAINER}"
    return ["bash", "-c", f"python -c {shlex.quote(REPORT[framework])} && exec {train}"]


def missing_outputs(output_dir: Path) -> list[str]:
    """What a passing run must have written and did not."""
    missing = [name for name in RECORD_FILES if not (output_dir / name).is_file()]
    if not any(next(output_dir.glob(pattern), None) for pattern in CHECKPOINT_GLOBS):
        missing.append("a checkpoint (*.pt or *.ckpt)")
    return missing


def run_smoke(
    engine: Engine,
    tag: str,
    framework: str,
    output_dir: Path,
    *,
    timeout_s: float,
    on_line: Lines,
    accelerators: Accelerators | None = None,
) -> SmokeResult:
    """Run the smoke test in ``tag``; raise ContainerFailed unless it trains and writes
    a checkpoint and the run record."""
    image = engine.require_image(tag, "build it first with gen image build")
    seen = accelerators or engine.accelerators()
    if output_dir.exists():
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True)
    # The image runs as a non-root user whose uid the host does not know.
    output_dir.chmod(0o777)
    result = engine.run(
        tag,
        command(framework),
        timeout_s=timeout_s,
        on_line=on_line,
        volumes={str(output_dir): OUTPUT_IN_CONTAINER},
        accelerators=seen,
        # Never as root, even for an image that forgot its USER line.
        user="1000:1000" if image.runs_as_root else None,
    )
    tail = result.log[-20:]
    if result.exit_code != 0:
        raise ContainerFailed(
            f"smoke test failed in {tag}: exit code {result.exit_code}", result.exit_code, tail
        )
    missing = missing_outputs(output_dir)
    if missing:
        raise ContainerFailed(
            f"smoke test in {tag} exited 0 but did not write {', '.join(missing)}", 0, tail
        )
    return SmokeResult(
        tag=tag,
        accelerators=seen.describe(),
        report=[line for line in result.log if line.startswith("env: ")],
        outputs=sorted(p.name for p in output_dir.iterdir()),
        output_dir=output_dir,
    )
