"""What bench_gpu.py runs, each in its own process: train.py of a rendered PyTorch project on
a device, and its baselines (bare_loop.py, bare_stream.py, bare_start.py, the OpenI sample).

Needs torch, numpy and Pillow only: no generator, so that it runs on a GPU host that has a
rendered project and nothing of the template's own dependencies (jinja2, click, rich). The
digits come from the project's own data/ (the template ships them there), the PNGs are
written here with Pillow.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import trainbench as tb

BENCH = Path(__file__).resolve().parent
SAMPLE = BENCH / "samples" / "openi_mnist_torch.py"
IDX = {
    "train-images-idx3-ubyte": "train",
    "train-labels-idx1-ubyte": "train",
    "t10k-images-idx3-ubyte": "test",
    "t10k-labels-idx1-ubyte": "test",
}
# train.py's log line: "start-up 3.12 s to the first step: interpreter and imports 1.40, ..."
STARTUP = re.compile(r"start-up [\d.]+ s to the first step: ([^\n]*)")
TIMEOUT = 600


def idx_array(data: bytes) -> np.ndarray:
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def idx_bytes(array: np.ndarray) -> bytes:
    dims = b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    return bytes([0, 0, 0x08, array.ndim]) + dims + np.ascontiguousarray(array).tobytes()


def shipped_digits(project: Path) -> dict[str, np.ndarray]:
    """The digits the project ships in data/ (train/ and test/, gzipped idx); else the
    generator's (numpy and scikit-learn), where it imports."""
    found = {name: project / "data" / part / f"{name}.gz" for name, part in IDX.items()}
    if all(path.is_file() for path in found.values()):
        return {name: idx_array(gzip.decompress(path.read_bytes())) for name, path in found.items()}
    arrays = tb.digits_as_mnist()
    values = (arrays.train_images, arrays.train_labels, arrays.test_images, arrays.test_labels)
    return dict(zip(IDX, values, strict=True))


def write_digits(project: Path, directory: Path, repeat: int) -> tb.Digits:
    """The digits as flat idx files in directory, the train split repeated."""
    arrays = shipped_digits(project)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
        arrays[name] = np.concatenate([arrays[name]] * repeat)
    directory.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        (directory / name).write_bytes(idx_bytes(array))
    return tb.read_digits(directory)


def write_pngs(digits: tb.Digits, root: Path) -> Path:
    """The same digits as 28x28 grayscale PNGs: root/train/<digit>/*.png, root/test/..."""
    from PIL import Image

    splits = {
        "train": (digits.train_images, digits.train_labels),
        "test": (digits.test_images, digits.test_labels),
    }
    for split, (images, labels) in splits.items():
        for digit in np.unique(labels):
            (root / split / str(digit)).mkdir(parents=True, exist_ok=True)
        for i, (image, label) in enumerate(zip(images, labels, strict=True)):
            Image.fromarray(image, mode="L").save(root / split / str(label) / f"{i:06d}.png")
    return root


def startup_split(text: str) -> dict[str, float] | None:
    """The phases of train.py's start-up line, seconds each; None where it printed none."""
    match = STARTUP.search(text)
    if match is None:
        return None
    parts = (part.rsplit(" ", 1) for part in match.group(1).strip().split(", "))
    return {name: float(value) for name, value in parts}


def run(argv: list[str], what: str, cwd: Path | None = None) -> tuple[float, str, str]:
    """(wall seconds, stdout, stderr) of one process; exits with its tail on failure."""
    began = time.perf_counter()
    try:
        result = subprocess.run(
            argv, cwd=cwd, env=tb.one_process_env(), capture_output=True, text=True,
            timeout=TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        sys.exit(f"error: {what} ran past {TIMEOUT} s")
    wall = time.perf_counter() - began
    if result.returncode != 0:
        sys.exit(f"error: {what} failed:\n{(result.stdout + result.stderr)[-2000:]}")
    return wall, result.stdout, result.stderr


@dataclass
class Bench:
    """The runs on one device, over one project, digits and PNG folder."""

    project: Path
    data: Path
    pngs: Path
    work: Path
    device: str
    epochs: int
    workers: int
    max_epochs: int
    runs: int = 0
    # train.py's start-up split, of each batch-32 run in memory (None: it printed none).
    splits: list[dict[str, float] | None] = field(default_factory=list)
    last_split: dict[str, float] | None = None
    # Where each time-to-accuracy run of train.py went (tb.Run.phases, and "wall").
    tta_phases: list[dict[str, float]] = field(default_factory=list)

    def train_py(self, *flags: str) -> tb.Run:
        """train.py as a user runs it on the device, its run record read back."""
        self.runs += 1
        output = self.work / f"run-{self.runs}"
        argv = [sys.executable, "train.py", "--device_target", self.device]
        argv += ["--seed", str(tb.SEED), "--train_url", str(output), *flags]
        start = time.time()
        wall, stdout, stderr = run(argv, "train.py", cwd=self.project)
        lines = (output / "metrics.jsonl").read_text().splitlines()
        self.last_split = startup_split(stdout + "\n" + stderr)
        return tb.Run(wall, start, time.time(), [json.loads(line) for line in lines])

    def script(self, script: Path, *args: str) -> dict:
        """A baseline script's JSON report (its last line)."""
        _, stdout, _ = run([sys.executable, str(script), *args], script.name)
        return json.loads(stdout.strip().splitlines()[-1])

    def ours_rate(self, batch: int) -> float:
        """train.py's steady samples/s on the digits in memory; batch 32 keeps its start-up."""
        flags = ["--data_url", str(self.data), "--batch_size", str(batch)]
        result = self.train_py(*flags, "--epoch_size", str(self.epochs))
        if batch == tb.BATCH_SIZE:
            self.splits.append(self.last_split)
        return result.steady

    def bare_rate(self, batch: int) -> float:
        args = ["pytorch", str(self.project), str(self.data), "--device", self.device]
        args += ["--epochs", str(self.epochs), "--batch-size", str(batch)]
        return self.script(BENCH / "bare_loop.py", *args)["samples_per_s"]

    def ours_stream(self) -> float:
        flags = ["--data_url", str(self.pngs), "--epoch_size", str(self.epochs)]
        flags += ["--data_in_memory", "false", "--data_num_workers", str(self.workers)]
        return self.train_py(*flags).steady

    def bare_stream(self) -> float:
        args = [str(self.project), str(self.pngs), "--device", self.device]
        args += ["--workers", str(self.workers), "--epochs", str(self.epochs)]
        return self.script(BENCH / "bare_stream.py", *args)["samples_per_s"]

    def ours_tta(self) -> tuple[float, int, float]:
        """(whole-process seconds, epochs, test accuracy) of the shortest train.py run, in
        whole epochs, that ends at tb.TARGET_ACCURACY or above."""
        for epochs in range(1, self.max_epochs + 1):
            result = self.train_py("--data_url", str(self.data), "--epoch_size", str(epochs))
            if result.accuracy >= tb.TARGET_ACCURACY:
                self.tta_phases.append({"wall": result.wall, **result.phases()})
                return result.wall, epochs, result.accuracy
        sys.exit(f"error: train.py did not reach {tb.TARGET_ACCURACY} in {self.max_epochs} epochs")

    def bare_tta(self) -> tuple[float, int, float]:
        """The same for the OpenI sample's loop on the same device."""
        flags = ("--device", self.device)
        return tb.sample_time_to_accuracy(SAMPLE, self.data, self.max_epochs, *flags)

    def bare_start(self) -> dict[str, float]:
        """bare_start.py's phases, seconds each."""
        args = ["pytorch", str(self.project), str(self.data), "--device", self.device]
        return self.script(BENCH / "bare_start.py", *args)


def median_split(splits: list[dict[str, float]]) -> dict[str, float]:
    """Each phase's median over the runs, and the median of the runs' totals."""
    phases = list(splits[0])
    out = {phase: statistics.median(split.get(phase, 0.0) for split in splits) for phase in phases}
    out["total"] = statistics.median(sum(split.values()) for split in splits)
    return out
