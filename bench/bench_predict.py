"""Benchmark predict.py and export.py of a generated PyTorch project on the CPU.

**predict.py throughput.** Images per second over a folder of 28x28 grayscale PNGs (the
digits' 1,797 train and test images, --copies times over, written once into a scratch
directory and reused), each command its own process, in the project's directory:

- predict.py as a user runs it: ``python predict.py --checkpoint last --train_url OUT
  --output X.jsonl --device_target cpu FOLDER``, OUT a run of the project trained one epoch
  on its shipped digits (trained once, before anything is timed);
- the baseline, a hand-written loop (this file, --hand): the project's own LeNet class
  (src/model.py) with the checkpoint's weights (``torch.load(weights_only=True)``) and its
  ``data_mean`` / ``data_std``; the same sorted files in batches of config.yaml's batch_size
  (32), each opened with Pillow, ``convert("L")``, ``np.asarray``, stacked, normalised
  ``(x/255 - mean/255)/(std/255)``, the model under ``torch.inference_mode()``, softmax,
  top 5, one JSON line an image (input, class, probability, top_k): the work predict.py
  does, as a user writes it.

Two figures a command: (a) the whole process, images over its wall time (what the user
waits for, start-up included); (b) throughput, start-up left out: each command also runs on
a folder of one batch (32 images), and throughput is (N - 32) / (t(N) - t(32)). Each repeat
runs both commands (the whole folder, then the small one), in the other order every other
repeat; a ratio is the median over the repeats of predict.py's figure against the hand
loop's of the same repeat. The rows of the last repeat are compared: the same inputs, in the
same order, with the same class. Goal: predict.py at least 0.9x the hand loop's throughput.

**Export.** The wall time of ``export.py --format onnx`` and ``--format torchscript`` (each
its own process: start-up, the checkpoint and 16 test samples read, the file written, loaded
back and checked, the sidecar), and the latency of one batch (1 and 32 images) on one CPU
thread (``torch.set_num_threads(1)``, onnxruntime's ``intra_op_num_threads=1``), in one
helper process (this file, --latency): the eager model (the project's LeNet with the
checkpoint's weights, and again in channels_last as predict.py runs it on the CPU), the
TorchScript file (``torch.jit.load``) and the ONNX file (onnxruntime). After 20 warm-up
calls each, 200 rounds call every model once in turn (the order turned every round); the
median (and the fastest) call; ratios against eager.

PyTorch only: MindSpore's predict.py runs the same src/scaffold/infer code over its own
backend; its figures would take another trained run and are left out.

--threads sets OMP_NUM_THREADS for every timed process alike (default: unset, torch's own
choice); the latencies are one thread whatever it says.

    python bench/bench_predict.py [--quick] [--repeats 3] [--copies 11] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

SIZE = 28
BATCH = 32  # the project's batch_size (config.yaml): predict.py's batch and the hand loop's
SMALL = BATCH  # images in the start-up's folder: one batch
TOP_K = 5  # predict.py's default --top_k
# 11 copies of the digits' 1,797 images: 19,767 PNGs (the issue asks for about 20,000).
COPIES, QUICK_COPIES = 11, 2
QUICK_REPEATS = 2
LATENCY_CALLS, WARMUP = 200, 20
COMPLETE = ".complete"
PREDICT, HAND = "predict.py", "hand loop"
FORMATS = {"onnx": ".onnx", "torchscript": ".torchscript"}
MODELS = ("eager", "eager channels_last", "torchscript", "onnxruntime")


def scratch() -> Path:
    """Where data worth keeping between runs goes."""
    return Path(os.environ.get("BENCH_SCRATCH") or tempfile.gettempdir()) / "train-template-bench"


def write_pngs(root: Path, copies: int, limit: int | None = None) -> Path:
    """root/c<copy>/<index>.png: the digits' train and test images as 28x28 grayscale PNGs,
    ``copies`` times (or the first ``limit``), written once; a marker written last tells a
    finished folder from an interrupted one."""
    if (root / COMPLETE).is_file():
        return root
    import numpy as np
    import trainbench as tb
    from PIL import Image

    shutil.rmtree(root, ignore_errors=True)
    digits = tb.digits_as_mnist()
    images = np.concatenate([digits.train_images, digits.test_images])
    total = copies * len(images) if limit is None else limit
    print(f"writing {total:,} PNGs into {root} (once)...", file=sys.stderr)
    for index in range(total):
        copy, number = divmod(index, len(images))
        folder = root / f"c{copy:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(images[number]).save(folder / f"{number:04d}.png")
    (root / COMPLETE).write_text("")
    return root


def count_pngs(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.png"))


def threads_env(args: argparse.Namespace) -> dict[str, str]:
    """--threads for every timed process alike: OpenMP's compute threads."""
    return {} if args.threads is None else {"OMP_NUM_THREADS": str(args.threads)}


def timed(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> float:
    """The wall time of one whole process; exits with its error output if it fails."""
    import trainbench as tb

    start = time.perf_counter()
    result = subprocess.run(
        argv, cwd=cwd, env={**tb.one_process_env(), **env}, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"error: {what} failed:\n{result.stderr[-2000:]}")
    return wall


def trained_run(work: Path, args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """A PyTorch project, its run trained one epoch on the shipped digits, and the run's
    last checkpoint."""
    import trainbench as tb

    project = tb.render_project(work, "predictbench", framework="pytorch")
    output = work / "run"
    flags = ["--train_url", str(output), "--epoch_size", "1"]
    print("training the project one epoch on its digits...", file=sys.stderr)
    tb.run_train(project, output, flags, threads_env(args))
    checkpoint = output / json.loads((output / "latest.json").read_text())["latest"]
    return project, output, checkpoint


def predict_argv(output: Path, folder: Path, rows: Path) -> list[str]:
    return [
        *(sys.executable, "predict.py", "--checkpoint", "last", "--train_url", str(output)),
        *("--output", str(rows), "--device_target", "cpu", str(folder)),
    ]


def hand_argv(project: Path, checkpoint: Path, folder: Path, rows: Path) -> list[str]:
    me = str(Path(__file__).resolve())
    return [sys.executable, me, "--hand", str(project), str(checkpoint), str(folder), str(rows)]


def hand_loop(project: Path, checkpoint: Path, folder: Path, rows: Path) -> None:
    """--hand: what a user writes to label a folder with the checkpoint: the project's
    LeNet, Pillow, the same batch, softmax, top 5, a JSON line an image."""
    import numpy as np
    import torch
    from PIL import Image

    sys.path.insert(0, str(project))
    from src.model import LeNet

    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    channels, height, width = state["data_shape"]
    count = state["num_classes"]
    classes = list(state.get("classes") or ())
    if len(classes) != count:  # MNIST's classes have no names: their indices
        classes = [str(index) for index in range(count)]
    net = LeNet(count, channels, (height, width))
    net.load_state_dict(state["model"])
    net.eval()
    mean = torch.tensor(state["data_mean"], dtype=torch.float32).view(1, -1, 1, 1) / 255
    std = torch.tensor(state["data_std"], dtype=torch.float32).view(1, -1, 1, 1) / 255
    files = sorted(folder.rglob("*.png"))
    k = min(TOP_K, count)
    with rows.open("w", encoding="utf-8") as out, torch.inference_mode():
        for start in range(0, len(files), BATCH):
            names = files[start : start + BATCH]
            pixels = []
            for name in names:
                with Image.open(name) as image:
                    pixels.append(np.asarray(image.convert("L")))
            batch = torch.from_numpy(np.stack(pixels)).unsqueeze(1).float()
            inputs = (batch / 255 - mean) / std
            probabilities = torch.softmax(net(inputs), dim=1)
            top, index = probabilities.topk(k, dim=1)
            for name, ps, cs in zip(names, top.tolist(), index.tolist(), strict=True):
                ranked = [
                    {"class": classes[c], "probability": round(p, 6)}
                    for c, p in zip(cs, ps, strict=True)
                ]
                line = {"input": str(name), **ranked[0], "top_k": ranked}
                out.write(json.dumps(line) + "\n")


@dataclass(frozen=True)
class Labelling:
    """One command of one repeat: the whole folder's wall time and the small folder's."""

    images: int
    wall: float
    startup: float  # the wall time on a folder of SMALL images

    @property
    def whole_rate(self) -> float:
        return self.images / self.wall

    @property
    def rate(self) -> float:
        return (self.images - SMALL) / (self.wall - self.startup)


def agreement(ours: Path, theirs: Path) -> str:
    """How far the two row files agree: the same inputs in the same order, the same class."""
    a = [json.loads(line) for line in ours.read_text(encoding="utf-8").splitlines()]
    b = [json.loads(line) for line in theirs.read_text(encoding="utf-8").splitlines()]
    inputs = sum(x["input"] == y["input"] for x, y in zip(a, b, strict=False))
    same = sum(x["class"] == y["class"] for x, y in zip(a, b, strict=False))
    drift = max(
        (abs(x["probability"] - y["probability"]) for x, y in zip(a, b, strict=False)),
        default=0.0,
    )
    return (
        f"rows: {len(a):,} (predict.py) and {len(b):,} (hand loop); the same input {inputs:,}, "
        f"the same class {same:,}; probabilities at most {drift:.1e} apart"
    )


def spread(values: list[float], digits: int = 0) -> str:
    """min / median / max, one table cell."""
    cells = (min(values), statistics.median(values), max(values))
    return " / ".join(f"{value:,.{digits}f}" for value in cells)


def ratio_cells(ratios: list[float]) -> str:
    return f"**{statistics.median(ratios):.2f}x** ({min(ratios):.2f}x to {max(ratios):.2f}x)"


def throughput(
    args: argparse.Namespace, project: Path, output: Path, checkpoint: Path, work: Path
) -> list[str]:
    """predict.py against the hand loop, paired by repeat; the report's lines."""
    big = write_pngs(scratch() / f"digits-png{SIZE}-x{args.copies}", args.copies)
    small = write_pngs(scratch() / f"digits-png{SIZE}-first{SMALL}", 1, SMALL)
    images = count_pngs(big)
    argv: dict[str, Callable[[Path, Path], list[str]]] = {
        PREDICT: lambda folder, rows: predict_argv(output, folder, rows),
        HAND: lambda folder, rows: hand_argv(project, checkpoint, folder, rows),
    }
    rows = {PREDICT: work / "predict.jsonl", HAND: work / "hand.jsonl"}
    env = threads_env(args)
    runs: dict[str, list[Labelling]] = {name: [] for name in argv}
    for repeat in range(args.repeats):
        # Every other repeat in reverse: a machine growing busier or quieter weighs on both.
        for name in list(argv) if repeat % 2 == 0 else list(argv)[::-1]:
            wall = timed(argv[name](big, rows[name]), project, env, name)
            startup = timed(argv[name](small, work / "small.jsonl"), project, env, name)
            runs[name].append(Labelling(images, wall, startup))
            print(
                f"  repeat {repeat + 1} {name}: {wall:.2f} s for {images:,} images, "
                f"{startup:.2f} s for {SMALL}",
                file=sys.stderr,
            )
    threads = "default threads" if args.threads is None else f"OMP_NUM_THREADS={args.threads}"
    lines = [
        f"### predict.py: {images:,} PNGs {SIZE}x{SIZE} grayscale, batch {BATCH}, CPU "
        f"({os.cpu_count()} cores, {threads}), torch {version('torch')}, "
        f"{args.repeats} repeats",
        "",
        "| command | whole process s (min / median / max) | images/s, whole process | "
        f"start-up s ({SMALL} images) | images/s, start-up left out |",
        "|---|---|---|---|---|",
    ]
    for name, labelled in runs.items():
        lines.append(
            f"| {name} | {spread([r.wall for r in labelled], 2)} "
            f"| {spread([r.whole_rate for r in labelled])} "
            f"| {spread([r.startup for r in labelled], 2)} "
            f"| {spread([r.rate for r in labelled])} |"
        )
    pairs = list(zip(runs[PREDICT], runs[HAND], strict=True))
    lines += [
        "",
        "| predict.py / hand loop | median over the repeats (range) |",
        "|---|---|",
        f"| images/s, whole process | "
        f"{ratio_cells([p.whole_rate / h.whole_rate for p, h in pairs])} |",
        f"| images/s, start-up left out | {ratio_cells([p.rate / h.rate for p, h in pairs])} |",
        f"| start-up seconds | {ratio_cells([p.startup / h.startup for p, h in pairs])} |",
        "",
        "Goal: predict.py at least 0.9x the hand loop's images/s, start-up left out.",
        agreement(rows[PREDICT], rows[HAND]) + ".",
    ]
    return lines


def export_figures(
    args: argparse.Namespace, project: Path, output: Path, checkpoint: Path, work: Path
) -> list[str]:
    """export.py's wall time per format, then the exported files' latency; the report's lines."""
    import trainbench as tb

    files = {fmt: work / "export" / f"model{suffix}" for fmt, suffix in FORMATS.items()}
    walls: dict[str, list[float]] = {fmt: [] for fmt in files}
    env = threads_env(args)
    for repeat in range(args.repeats):
        for fmt in list(files) if repeat % 2 == 0 else list(files)[::-1]:
            argv = [sys.executable, "export.py", "--format", fmt, "--checkpoint", "last"]
            argv += ["--train_url", str(output), "--output", str(files[fmt])]
            argv += ["--device_target", "cpu"]
            walls[fmt].append(timed(argv, project, env, f"export.py --format {fmt}"))
            print(f"  repeat {repeat + 1} export {fmt}: {walls[fmt][-1]:.2f} s", file=sys.stderr)
    me = str(Path(__file__).resolve())
    argv = [sys.executable, me, "--latency", str(project), str(checkpoint)]
    result = subprocess.run(
        [*argv, str(files["onnx"]), str(files["torchscript"])],
        env=tb.one_process_env(),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit(f"error: the latency helper failed:\n{result.stderr[-2000:]}")
    found: dict[str, dict[str, list[float]]] = json.loads(result.stdout.strip().splitlines()[-1])
    lines = [
        f"### export.py, CPU, {args.repeats} repeats",
        "",
        "| format | export.py wall s (min / median / max) | file size |",
        "|---|---|---:|",
    ]
    for fmt, values in walls.items():
        size = files[fmt].stat().st_size / 1000
        lines.append(f"| {fmt} | {spread(values, 2)} | {size:,.0f} kB |")
    lines += [
        "",
        f"One batch on one CPU thread, median of {LATENCY_CALLS} calls (fastest in brackets); "
        f"onnxruntime {version('onnxruntime')}:",
        "",
        "| model | batch 1, ms | of eager | batch 32, ms | of eager |",
        "|---|---:|---:|---:|---:|",
    ]
    base = {batch: statistics.median(found["eager"][batch]) for batch in found["eager"]}
    for name in MODELS:
        cells = []
        for batch, times in found[name].items():
            median = statistics.median(times)
            cells += [f"{median:.3f} ({min(times):.3f})", f"{median / base[batch]:.2f}x"]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines


def latencies(project: Path, checkpoint: Path, onnx_file: Path, script_file: Path) -> None:
    """--latency: ms of one call (batch 1 and BATCH) on one thread for each of MODELS, the
    calls interleaved; prints {model: {batch: [ms, ...]}} as JSON."""
    import numpy as np
    import onnxruntime
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(project))
    from src.model import LeNet

    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    channels, height, width = state["data_shape"]
    net = LeNet(state["num_classes"], channels, (height, width))
    net.load_state_dict(state["model"])
    net.eval()
    nhwc = LeNet(state["num_classes"], channels, (height, width))
    nhwc.load_state_dict(state["model"])
    nhwc = nhwc.eval().to(memory_format=torch.channels_last)
    scripted = torch.jit.load(str(script_file), map_location="cpu")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(onnx_file), options, ["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def channels_last(x: np.ndarray) -> object:
        return nhwc(torch.from_numpy(x).contiguous(memory_format=torch.channels_last))

    runners: dict[str, Callable[[np.ndarray], object]] = {
        "eager": lambda x: net(torch.from_numpy(x)),
        "eager channels_last": channels_last,
        "torchscript": lambda x: scripted(torch.from_numpy(x)),
        "onnxruntime": lambda x: session.run(None, {name: x}),
    }
    found: dict[str, dict[str, list[float]]] = {label: {} for label in runners}
    rng = np.random.default_rng(0)
    with torch.inference_mode():
        for batch in (1, BATCH):
            inputs = rng.standard_normal((batch, channels, height, width), np.float32)
            for run in runners.values():
                for _ in range(WARMUP):
                    run(inputs)
            for label in runners:
                found[label][str(batch)] = []
            order = list(runners)
            for call in range(LATENCY_CALLS):
                shift = call % len(order)
                for label in order[shift:] + order[:shift]:
                    start = time.perf_counter()
                    runners[label](inputs)
                    found[label][str(batch)].append((time.perf_counter() - start) * 1000)
    print(json.dumps(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds of every command")
    parser.add_argument(
        "--copies", type=int, default=COPIES, help="of the digits' 1,797 images (11: 19,767)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="OMP_NUM_THREADS for every timed process (default: unset, torch's own choice)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_COPIES} copies (3,594 images), {QUICK_REPEATS} repeats: to try it out",
    )
    # Run by the benchmark in processes of their own: the hand loop, the latencies.
    parser.add_argument("--hand", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--latency", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hand:
        hand_loop(*(Path(arg) for arg in args.hand))
        return
    if args.latency:
        latencies(*(Path(arg) for arg in args.latency))
        return
    if args.quick:
        args.copies, args.repeats = QUICK_COPIES, QUICK_REPEATS
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        project, output, checkpoint = trained_run(work, args)
        lines = throughput(args, project, output, checkpoint, work)
        lines += ["", *export_figures(args, project, output, checkpoint, work)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
