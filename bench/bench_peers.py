"""The generated project's train.py against what users would pick instead, on the same job: the
project's LeNet, the digits (the training split repeated) held in memory, SGD with train.py's
defaults, float32 on the CPU (bfloat16 where the peer supports it on a GPU).

The peers (bench/peers/): Lightning's Trainer as users get it and lean (no progress bar,
logger, checkpoints or summary; and with channels_last), Lightning Fabric with its own loop
(and with channels_last), accelerate, and the bare loop (bench/bare_loop.py's step, batches
gathered before the clock). Lightning and accelerate are installed by the bench into their own
environment (a venv over this one's torch, so that every program runs the same torch); one
that cannot be installed is one line, and the rest are measured.

Every program runs as a whole process, paired and interleaved: each pair runs train.py and
every peer once per batch size, in an order rotated pair by pair. Reported per batch size:
epoch 2's samples/s, train.py's divided by the peer's in the same pair, the seconds from the
process start to the first step, the peak resident memory and the whole-process seconds: each
the median over the pairs, and its range (min to max). --tables FILE prints a --json file's.

    python bench/bench_peers.py [--pairs 5] [--batch-sizes 32 256] [--repeat-data 20]
        [--device cpu|cuda] [--peers-env DIR] [--json FILE] [--quick] [--tables FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import trainbench as tb

BENCH = Path(__file__).resolve().parent
PEERS = BENCH / "peers"
# What the bench installs into the peers' environment, each on its own: one that fails is
# left out with one line.
PACKAGES = {"lightning": "lightning>=2.4", "accelerate": "accelerate>=1.0"}
TRAIN = "train.py"
# name: (script in bench/peers, its options, the package it needs, or "" for none)
RUNNERS = {
    "Lightning Trainer, defaults": ("lightning_trainer.py", (), "lightning"),
    "Lightning Trainer, lean": ("lightning_trainer.py", ("--lean",), "lightning"),
    "Lightning Trainer, lean, channels_last": (
        "lightning_trainer.py",
        ("--lean", "--channels-last"),
        "lightning",
    ),
    "Lightning Fabric": ("fabric_loop.py", (), "lightning"),
    "Fabric, channels_last": ("fabric_loop.py", ("--channels-last",), "lightning"),
    "accelerate": ("accelerate_loop.py", (), "accelerate"),
    "the bare loop": ("bare.py", (), ""),
}
# --quick's: every peer script and every flag, the flags together (a smoke of the code).
QUICK = (
    "Lightning Trainer, defaults",
    "Lightning Trainer, lean, channels_last",
    "Fabric, channels_last",
    "accelerate",
    "the bare loop",
)


@dataclass(frozen=True)
class Result:
    """One whole process: epoch 2's samples/s, seconds to its first step, peak RSS, wall."""

    samples_per_s: float
    first_step: float
    peak_mib: float
    wall: float


def peers_env(where: Path) -> tuple[Path, dict[str, str]]:
    """The peers' Python (a venv at ``where`` that sees this one's torch through a .pth file)
    and the version of each package it holds; one line for each it could not install."""
    python = where / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
        ensure = [str(python), "-m", "ensurepip", "--upgrade"]
        subprocess.run(ensure, check=True, capture_output=True)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # This environment's packages (torch, numpy) behind the venv's own: one torch for all.
    Path(site, "bench-shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    versions = {}
    for name, requirement in PACKAGES.items():
        found = _version(python, name)
        if found is None:
            install = [str(python), "-m", "pip", "install", "--quiet", requirement]
            done = subprocess.run(install, capture_output=True, text=True)
            found = _version(python, name) if done.returncode == 0 else None
            if found is None:
                why = (done.stderr.strip().splitlines() or ["no error output"])[-1]
                print(f"{name}: not installable ({why}); its rows are left out", flush=True)
                continue
        versions[name] = found
    return python, versions


def _version(python: Path, name: str) -> str | None:
    probe = f"from importlib.metadata import version; print(version({name!r}))"
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else None


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, float, float]:
    """(stdout, wall seconds, peak RSS in MiB) of one whole process; exits on a failure."""
    began = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        env = {**env, "BENCH_T0": repr(time.time())}
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - began
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if process.returncode != 0:
        sys.exit(f"error: {' '.join(argv[1:3])} failed:\n{errors[-2000:]}")
    return text, wall, usage.ru_maxrss / 1024


def run_train(project: Path, data: Path, work: Path, args: argparse.Namespace, size: int) -> Result:
    """train.py as users run it, its figures from its run record."""
    output = Path(tempfile.mkdtemp(dir=work, prefix="train-"))
    argv = [sys.executable, TRAIN, "--device_target", args.device, "--seed", str(tb.SEED)]
    argv += ["--data_url", str(data), "--train_url", str(output)]
    argv += ["--epoch_size", str(args.epochs), "--batch_size", str(size)]
    start = time.time()
    _, wall, peak = timed(argv, project, tb.one_process_env())
    lines = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    run = tb.Run(wall, start, start + wall, lines)
    rates = run.rates
    return Result(rates[1] if len(rates) > 1 else rates[-1], _first(run, size), peak, wall)


def _first(run: tb.Run, size: int) -> float:
    """The first step's start, from the process's: epoch 1's record line less its steps'
    seconds (trainbench's start-up phase, at any batch size)."""
    trains = run.of("train")
    seconds = trains[0]["step"] * size / trains[0]["samples_per_s"]
    return trains[0]["time"] - seconds - run.start


def run_peer(
    python: Path, name: str, project: Path, data: Path, work: Path, args, size: int
) -> Result:
    script, options, _ = RUNNERS[name]
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="peer-"))
    argv = [str(python), str(PEERS / script), str(project), str(data), *options]
    argv += ["--epochs", str(args.epochs), "--batch-size", str(size), "--device", args.device]
    argv += ["--work", str(scratch)]
    text, wall, peak = timed(argv, scratch, tb.one_process_env())
    figures = json.loads(text.strip().splitlines()[-1])
    return Result(figures["samples_per_s"], figures["first_step"], peak, wall)


def measured(versions: dict[str, str]) -> list[str]:
    """train.py and the peers whose package is installed (``versions``), or that need none."""
    return [TRAIN] + [n for n, (_, _, need) in RUNNERS.items() if not need or need in versions]


def measure(args: argparse.Namespace, work: Path) -> dict:
    python, versions = peers_env(args.peers_env)
    import torch

    versions = {"torch": torch.__version__, **versions}
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    names = [n for n in measured(versions) if n == TRAIN or not args.quick or n in QUICK]
    project = tb.render_project(work, "peers", framework="pytorch")
    data = tb.write_digits(work / "digits", args.repeat_data).directory
    results: dict[int, dict[str, list[Result]]] = {
        size: {name: [] for name in names} for size in args.batch_sizes
    }
    for pair in range(args.pairs):
        for size in args.batch_sizes:
            order = names[pair % len(names) :] + names[: pair % len(names)]
            for name in order:
                if name == TRAIN:
                    result = run_train(project, data, work, args, size)
                else:
                    result = run_peer(python, name, project, data, work, args, size)
                results[size][name].append(result)
            print(f"pair {pair + 1} of {args.pairs}, batch {size}: done", flush=True)
    return {"versions": versions, "results": results}


def spread(values: list[float], digits: int, sign: str = "") -> str:
    """The median of the pairs' values, and their range (min to max) when there are several."""
    median = f"{statistics.median(values):{sign}.{digits}f}"
    if len(values) == 1:
        return median
    return f"{median} ({min(values):{sign}.{digits}f} to {max(values):{sign}.{digits}f})"


def table(results: dict[str, list[Result]]) -> str:
    """Markdown: each peer against train.py, pair by pair; each figure its median (min to max)."""
    ours = results[TRAIN]
    lines = [
        "| program | samples/s | train.py / it | first step, s | train.py's first step minus "
        "its, s | peak MiB | whole process, s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, runs in results.items():
        ratios = [a.samples_per_s / b.samples_per_s for a, b in zip(ours, runs, strict=True)]
        gaps = [a.first_step - b.first_step for a, b in zip(ours, runs, strict=True)]
        cells = [
            name,
            spread([r.samples_per_s for r in runs], 0),
            "" if name == TRAIN else spread(ratios, 2).replace(" (", "x (", 1),
            spread([r.first_step for r in runs], 2),
            "" if name == TRAIN else spread(gaps, 2, "+"),
            spread([r.peak_mib for r in runs], 0),
            spread([r.wall for r in runs], 1),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def saved(path: Path) -> dict:
    """What --json wrote, as measure() returns it."""
    found = json.loads(path.read_text())
    results = {
        int(size): {name: [Result(**run) for run in runs] for name, runs in by_name.items()}
        for size, by_name in found["results"].items()
    }
    return {"versions": found["versions"], "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--epochs", type=int, default=2, help="at least 2: epoch 2 is measured")
    parser.add_argument("--repeat-data", type=int, default=20, help="copies of the train split")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    default_env = Path(os.environ.get("BENCH_PEERS_ENV", BENCH / ".peers-env"))
    parser.add_argument("--peers-env", type=Path, default=default_env, help="the peers' venv")
    parser.add_argument("--json", type=Path, help="write every figure here too")
    quick = "a smoke of the code: 1 pair, batch 32, 1 copy, each peer script once"
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--tables", type=Path, help="print the tables of a --json file only")
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.batch_sizes, args.repeat_data = 1, [tb.BATCH_SIZE], 1
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: epoch 2's throughput is the figure")
    if args.tables:
        found = saved(args.tables)
        print("versions: " + ", ".join(f"{k} {v}" for k, v in found["versions"].items()))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
            found = measure(args, Path(tmp))
    run = "" if args.tables else f", {args.device}, {args.epochs} epochs"
    for size, results in found["results"].items():
        pairs = len(results[TRAIN])
        print(f"\nbatch {size}{run}, {pairs} pair(s); each figure the median (min to max)")
        print(table(results))
    if args.json and not args.tables:
        plain = {
            "versions": found["versions"],
            "results": {
                str(size): {name: [asdict(r) for r in runs] for name, runs in results.items()}
                for size, results in found["results"].items()
            },
        }
        args.json.write_text(json.dumps(plain, indent=1))


if __name__ == "__main__":
    main()
