"""Benchmark predict.py and export.py of a generated PyTorch project on the CPU.

**predict.py throughput.** Images per second over a folder of 28x28 grayscale PNGs (the
digits, copied to --images files, written once into a scratch directory), for

- predict.py: ``python predict.py --checkpoint last --output X.jsonl FOLDER`` of a project
  trained one epoch on its shipped digits;
- a hand-written loop, its own process too: the project's LeNet class with the checkpoint's
  weights and normalisation, Pillow (open, convert("L")), the same batch (config.yaml's 32),
  softmax and top 5, one JSON line an image: the work predict.py does, written as a user
  would write it.

Start-up (interpreter, torch, the model) is not throughput: each command also runs on a
folder of BATCH images, and a throughput is (N - BATCH) / (t(N) - t(BATCH)). Each repeat runs
both commands, in the other order every other repeat; the ratio is the median over repeats
of predict.py's throughput against the hand loop's of the same repeat. Goal: at least 0.9x.

**Export.** The wall time of ``export.py --format onnx`` and ``--format torchscript`` (each
its own process: start-up, reading the checkpoint and 16 test samples, writing, the check),
and the latency of one batch (1 and 32 images) on one CPU thread for the eager model, the
TorchScript file (torch.jit.load) and the ONNX file (onnxruntime), median of 200 calls
after 20 for warm-up; ratios against eager.

    python bench/bench_predict.py [--quick] [--repeats 3] [--images 20000]
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

BATCH = 32  # the project's batch_size (config.yaml)
COMPLETE = ".complete"
LATENCY_CALLS, WARMUP = 200, 20


def scratch() -> Path:
    return Path(os.environ.get("BENCH_SCRATCH") or tempfile.gettempdir()) / "train-template-bench"


def png_folder(count: int) -> Path:
    """``count`` 28x28 grayscale digit PNGs, written once (a marker tells a finished one)."""
    from PIL import Image

    from generator.sample_data import digits_as_mnist

    root = scratch() / f"digits-png28-{count}"
    if (root / COMPLETE).is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    digits = digits_as_mnist()
    images = [*digits.train_images, *digits.test_images]
    for index in range(count):
        folder = root / f"{index // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(images[index % len(images)]).save(folder / f"{index:06d}.png")
    (root / COMPLETE).write_text("")
    return root


def small_folder(big: Path, count: int) -> Path:
    """The first ``count`` images of ``big``: the start-up's measure."""
    root = scratch() / f"{big.name}-first{count}"
    if not (root / COMPLETE).is_file():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for path in sorted(big.rglob("*.png"))[:count]:
            shutil.copy(path, root / path.name)
        (root / COMPLETE).write_text("")
    return root


def trained_project(work: Path) -> tuple[Path, Path]:
    """A PyTorch project and the output of one epoch on its shipped digits."""
    from trainbench import render_project

    project = render_project(work, "predictbench", framework="pytorch")
    output = work / "run"
    command = [sys.executable, "train.py", "--device_target", "cpu", "--epoch_size", "1"]
    subprocess.run([*command, "--train_url", str(output)], cwd=project, check=True)
    return project, output


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def predict_command(output: Path, folder: Path, rows: Path) -> list[str]:
    return [
        *(sys.executable, "predict.py", "--device_target", "cpu", "--checkpoint", "last"),
        *("--train_url", str(output), "--output", str(rows), str(folder)),
    ]


def hand_command(project: Path, output: Path, folder: Path, rows: Path) -> list[str]:
    checkpoint = json.loads((output / "latest.json").read_text())["latest"]
    me = str(Path(__file__).resolve())
    return [
        sys.executable,
        me,
        "--hand",
        str(project),
        str(output / checkpoint),
        str(folder),
        str(rows),
    ]


def hand_loop(project: Path, checkpoint: Path, folder: Path, rows: Path) -> None:
    """What a user would write: the project's LeNet, Pillow, the same batch, softmax, top 5."""
    import numpy as np
    import torch
    from PIL import Image

    sys.path.insert(0, str(project))
    from src.model import LeNet

    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    count = state["num_classes"]
    classes = state["classes"] or [str(index) for index in range(count)]  # MNIST's: unnamed
    net = LeNet(count, 1, (28, 28))
    net.load_state_dict(state["model"])
    net.eval()
    mean = torch.tensor(state["data_mean"]).view(1, -1, 1, 1) / 255
    std = torch.tensor(state["data_std"]).view(1, -1, 1, 1) / 255
    files = sorted(str(p) for p in folder.rglob("*.png"))
    with rows.open("w") as out, torch.inference_mode():
        for start in range(0, len(files), BATCH):
            names = files[start : start + BATCH]
            pixels = np.stack([np.asarray(Image.open(n).convert("L")) for n in names])
            inputs = (torch.from_numpy(pixels)[:, None].float() / 255 - mean) / std
            probabilities = torch.softmax(net(inputs), dim=1)
            top, index = probabilities.topk(min(5, len(classes)), dim=1)
            for name, p, i in zip(names, top.tolist(), index.tolist(), strict=True):
                ranked = [
                    {"class": classes[c], "probability": q} for c, q in zip(i, p, strict=True)
                ]
                out.write(json.dumps({"input": name, **ranked[0], "top_k": ranked}) + "\n")


def throughput(args: argparse.Namespace, project: Path, output: Path, work: Path) -> list[str]:
    big = png_folder(args.images)
    small = small_folder(big, BATCH)
    rows = work / "rows.jsonl"
    commands = {
        "predict.py": lambda folder: predict_command(output, folder, rows),
        "hand loop": lambda folder: hand_command(project, output, folder, rows),
    }
    rates: dict[str, list[float]] = {name: [] for name in commands}
    for repeat in range(args.repeats):
        order = list(commands) if repeat % 2 == 0 else list(reversed(commands))
        for name in order:
            full = timed(commands[name](big), project)
            start = timed(commands[name](small), project)
            rates[name].append((args.images - BATCH) / (full - start))
            print(f"  repeat {repeat + 1} {name}: {full:.2f} s whole, {start:.2f} s for {BATCH}")
    ratios = [
        ours / hand for ours, hand in zip(rates["predict.py"], rates["hand loop"], strict=True)
    ]
    lines = [
        f"### predict.py throughput, {args.images} PNGs 28x28, batch {BATCH}, CPU",
        "",
        "| command | images/s min | median | max |",
        "|---|---:|---:|---:|",
    ]
    for name, values in rates.items():
        lines.append(
            f"| {name} | {min(values):,.0f} | {statistics.median(values):,.0f} | "
            f"{max(values):,.0f} |"
        )
    lines += ["", f"predict.py / hand loop: {statistics.median(ratios):.2f}x median "]
    lines[-1] += f"({min(ratios):.2f}-{max(ratios):.2f}; goal at least 0.9x)"
    return lines


def export_figures(args: argparse.Namespace, project: Path, output: Path, work: Path) -> list[str]:
    files = {"onnx": work / "model.onnx", "torchscript": work / "model.torchscript"}
    walls: dict[str, list[float]] = {fmt: [] for fmt in files}
    for _ in range(args.repeats):
        for fmt, path in files.items():
            command = [sys.executable, "export.py", "--device_target", "cpu", "--format", fmt]
            command += ["--checkpoint", "last", "--train_url", str(output), "--output", str(path)]
            walls[fmt].append(timed(command, project))
    checkpoint = json.loads((output / "latest.json").read_text())["latest"]
    me = str(Path(__file__).resolve())
    measured = subprocess.run(
        [sys.executable, me, "--latency", str(project), str(output / checkpoint)]
        + [str(files["onnx"]), str(files["torchscript"])],
        check=True,
        capture_output=True,
        text=True,
    )
    latency = json.loads(measured.stdout.splitlines()[-1])
    lines = ["### export.py, CPU", "", "| format | export.py wall s, min | median | max |"]
    lines.append("|---|---:|---:|---:|")
    for fmt, values in walls.items():
        lines.append(
            f"| {fmt} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} |"
        )
    lines += [
        "",
        "| model | batch 1, ms | ratio | batch 32, ms | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("eager", "torchscript", "onnxruntime"):
        one, many = latency[name]
        ratio_one, ratio_many = one / latency["eager"][0], many / latency["eager"][1]
        lines.append(f"| {name} | {one:.3f} | {ratio_one:.2f}x | {many:.3f} | {ratio_many:.2f}x |")
    return lines


def latencies(project: Path, checkpoint: Path, onnx_file: Path, script_file: Path) -> None:
    """Median ms of one batch (1 and 32) on one thread: eager, TorchScript, onnxruntime."""
    import numpy as np
    import onnxruntime
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(project))
    from src.model import LeNet

    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    net = LeNet(state["num_classes"], 1, (28, 28))
    net.load_state_dict(state["model"])
    net.eval()
    scripted = torch.jit.load(str(script_file))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(onnx_file), options, ["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    runners = {
        "eager": lambda x: net(torch.from_numpy(x)),
        "torchscript": lambda x: scripted(torch.from_numpy(x)),
        "onnxruntime": lambda x: session.run(None, {name: x}),
    }
    found: dict[str, list[float]] = {}
    with torch.inference_mode():
        for label, run in runners.items():
            found[label] = []
            for batch in (1, BATCH):
                inputs = np.random.default_rng(0).standard_normal((batch, 1, 28, 28), np.float32)
                for _ in range(WARMUP):
                    run(inputs)
                times = []
                for _ in range(LATENCY_CALLS):
                    start = time.perf_counter()
                    run(inputs)
                    times.append((time.perf_counter() - start) * 1000)
                found[label].append(statistics.median(times))
    print(json.dumps(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 images, 2 repeats")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--hand", nargs=4, metavar=("PROJECT", "CKPT", "FOLDER", "ROWS"))
    parser.add_argument("--latency", nargs=4, metavar=("PROJECT", "CKPT", "ONNX", "TS"))
    args = parser.parse_args()
    if args.hand:
        hand_loop(*(Path(a) for a in args.hand))
        return
    if args.latency:
        latencies(*(Path(a) for a in args.latency))
        return
    if args.quick:
        args.images, args.repeats = 2_000, 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        project, output = trained_project(work)
        lines = throughput(args, project, output, work)
        lines += ["", *export_figures(args, project, output, work)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
