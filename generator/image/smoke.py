"""`gen image smoke` as a library call: what runs in the container, and how it is judged."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from generator import engine as engines
from generator.devices.host import detect
from generator.engine import Engine, Lines
from generator.errors import ContainerFailed
from generator.image import arch as arches
from generator.image.plan import check_target, default_tag
from generator.render.project import read_record

OUTPUT_IN_CONTAINER = "/output"
RECORD_FILES = ("hparams.json", "metrics.jsonl", "artifacts.json")
CHECKPOINT_GLOBS = ("*.pt", "*.ckpt")
TAIL_LINES = 20
# predict.py's rows for the project's sample images, written next to the run's outputs.
PREDICTIONS = "predictions.jsonl"
SAMPLES = "samples"
# A language model's project (task lm) continues its sample prompts instead, a few tokens each.
PROMPTS = f"{SAMPLES}/prompts.txt"
NEW_TOKENS = 16

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
    """A passed smoke test: what the report said and what it wrote where."""

    report: list[str]
    outputs: list[str]
    output_dir: Path


def command(framework: str, task: str = "classify") -> list[str]:
    """The container command: the report, one short training run, then predict.py with its
    checkpoint on the project's sample images (or, for a language model, its sample prompts)."""
    common = f"--device_target auto --train_url {OUTPUT_IN_CONTAINER}"
    train = f"python train.py --smoke {common}"
    inputs = f"--prompts {PROMPTS} --max_new_tokens {NEW_TOKENS}" if task == "lm" else SAMPLES
    predict = (
        f"python predict.py --checkpoint last {common} "
        f"--output {OUTPUT_IN_CONTAINER}/{PREDICTIONS} {inputs}"
    )
    report = f"python -c {shlex.quote(REPORT[framework])}"
    return ["bash", "-c", f"{report} && {train} && exec {predict}"]


def _samples(project_dir: Path | None) -> tuple[int, str]:
    """How many rows predict.py must write, and of what: the sample images, or prompts."""
    if project_dir is None:
        return 1, "sample images"
    prompts = project_dir / PROMPTS
    if prompts.is_file():
        lines = prompts.read_text(encoding="utf-8").splitlines()
        return sum(1 for line in lines if line.strip()), "sample prompts"
    return len(list((project_dir / SAMPLES).glob("*.png"))), "sample images"


def missing_outputs(output_dir: Path, project_dir: Path | None = None) -> list[str]:
    """What a passing run must have written and did not: the record, a checkpoint, and a
    prediction for each of the project's sample images (or a continuation of each prompt)."""
    missing = [name for name in RECORD_FILES if not (output_dir / name).is_file()]
    if not any(next(output_dir.glob(pattern), None) for pattern in CHECKPOINT_GLOBS):
        missing.append("a checkpoint (*.pt or *.ckpt)")
    predictions = output_dir / PREDICTIONS
    samples, what = _samples(project_dir)
    rows = predictions.read_text(encoding="utf-8").splitlines() if predictions.is_file() else []
    if len(rows) < samples:
        missing.append(f"{PREDICTIONS} with a row for each of the {samples} {what}")
    return missing


def smoke_image(
    project_dir: Path,
    target: str,
    *,
    tag: str | None = None,
    timeout_s: float,
    on_line: Lines,
    on_status: Lines,
    dev: Path = Path("/dev"),
    connect: Callable[[], Engine] = engines.connect,
) -> SmokeResult:
    """Run the smoke test in the project's image for ``target``; raise ContainerFailed
    unless it trains and writes a checkpoint and the run record.

    GPUs or the NPUs under ``dev`` are passed in when the host has them.
    """
    project_dir = project_dir.resolve()
    options = read_record(project_dir)
    check_target(options, target)
    tag = tag or default_tag(options, target, project_dir)
    engine = connect()
    image = engine.require_image(tag, "build it first with gen image build")
    built_for = arches.image_arch(image)
    emulator = arches.check_emulation(built_for, str(engine.info().get("Architecture", "")))
    if emulator:
        on_status(f"{tag} is an {built_for} image: it runs here by {emulator}, slowly")
    accelerators = detect(engine.runtimes(), dev)
    on_status(f"smoke-testing {tag}: {accelerators.describe()}")
    output_dir = project_dir / "output" / f"smoke-{target}"
    if output_dir.exists():
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True)
    # The image runs as a non-root user whose uid the host does not know.
    output_dir.chmod(0o777)
    spec = accelerators.container(
        tag,
        command(options.framework, options.task),
        volumes={str(output_dir): OUTPUT_IN_CONTAINER},
        # Never as root, even for an image that forgot its USER line.
        user="1000:1000" if image.runs_as_root else None,
    )
    result = engine.run(spec, timeout_s=timeout_s, on_line=on_line)
    tail = result.log[-TAIL_LINES:]
    if result.exit_code != 0:
        raise ContainerFailed(
            f"smoke test failed in {tag}: exit code {result.exit_code}", result.exit_code, tail
        )
    missing = missing_outputs(output_dir, project_dir)
    if missing:
        raise ContainerFailed(
            f"smoke test in {tag} exited 0 but did not write {', '.join(missing)}", 0, tail
        )
    report = [line for line in result.log if line.startswith("env: ")]
    return SmokeResult(report, sorted(p.name for p in output_dir.iterdir()), output_dir)
