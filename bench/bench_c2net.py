"""Benchmark an OpenI C2Net job on the CPU, per framework, against the same training run
from local paths given as flags.

The C2Net job is started as the platform starts it: the job's environment variables, the
real `c2net` package, no path flags, the dataset a zip (MnistDataset.zip). Two ways:

- MOUNT: the zip is already in LOCAL_DATASET_PATH; train.py unpacks it in place and writes
  its outputs to LOCAL_OUTPUT_PATH, which the platform keeps.
- MOXING: c2net.context.prepare() downloads the zip from object storage and train.py calls
  upload_output() after each epoch's checkpoint and at the end. Object storage is the tests'
  moxing stand-in (tests/training/fake_moxing: obs:// paths are local directories), so the
  figures are train.py's own cost of staging and uploading, not a network's.

Reported from the run records (see trainbench.py): the wall time against the local run, the
start-up and data phase (unpacking, downloading) and the epoch ends per epoch (the
checkpoint upload), each as the median of the repeats.

    python bench/bench_c2net.py [pytorch|mindspore ...] [--epochs 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from pathlib import Path

import trainbench as tb

from tests.training.runs import FAKE_MOXING, c2net_env

FRAMEWORKS = ("pytorch", "mindspore")
WAYS = ("local flags", "C2Net MOUNT", "C2Net MOXING")


def job_env(run_dir: Path, method: str, archive: Path) -> tuple[dict[str, str], Path]:
    """(the job's variables, its output directory), the dataset zip placed as the platform
    places it: in LOCAL_DATASET_PATH for MOUNT, in object storage for MOXING."""
    env = c2net_env(run_dir / "job", method)
    obs = run_dir / "obs" / "bucket"
    (obs / "code").mkdir(parents=True)  # the job's code, which c2net downloads first
    dataset = Path(env["LOCAL_DATASET_PATH"]) if method == "MOUNT" else obs
    shutil.copy(archive, dataset / archive.name)
    path = os.pathsep.join(filter(None, [str(FAKE_MOXING), os.environ.get("PYTHONPATH")]))
    env |= {
        "PYTHONPATH": path,
        "FAKE_OBS_ROOT": str(run_dir / "obs"),
        "TRAIN_CACHE_DIR": str(run_dir / "cache"),
    }
    return env, Path(env["LOCAL_OUTPUT_PATH"])


def one_run(
    way: str, project: Path, digits: tb.Digits, archive: Path, run_dir: Path, epochs: int
) -> tb.Run:
    flags = ["--epoch_size", str(epochs)]
    if way == "local flags":
        return tb.run_train_py(project, digits.directory, run_dir / "output", *flags)
    env, output = job_env(run_dir, way.split()[-1], archive)
    run = tb.run_train(project, output, flags, env)
    if way.endswith("MOXING"):
        uploaded = run_dir / "obs" / "bucket" / "c2net-out" / "metrics.jsonl"
        if not uploaded.is_file():
            raise SystemExit(f"error: {way}: no run record uploaded to {uploaded.parent}")
    return run


def bench(framework: str, args: argparse.Namespace, work: Path) -> None:
    project = tb.render_project(work, f"c2net_{framework}", framework=framework)
    digits = tb.write_digits(work / f"data-{framework}" / "MnistDataset", args.repeat_data)
    archive = Path(shutil.make_archive(str(digits.directory), "zip", digits.directory))
    runs: dict[str, list[tb.Run]] = {way: [] for way in WAYS}
    for attempt in range(args.repeats):
        for way in WAYS:
            run_dir = work / f"{framework}-{way.replace(' ', '_')}-{attempt}"
            runs[way].append(one_run(way, project, digits, archive, run_dir, args.epochs))
    size = archive.stat().st_size / 1e6
    print(
        f"\n== {framework}: C2Net job on the CPU, digits x{args.repeat_data} "
        f"({size:.1f} MB zip), {args.epochs} epochs, median of {args.repeats} repeats\n"
    )
    columns = ("wall s", 9), ("of local", 10), ("start-up s", 12), ("epoch end s", 13)
    print(
        f"{'run':<16}" + "".join(f"{name:>{width}}" for name, width in columns) + f"{'exit s':>8}"
    )
    base = statistics.median(run.wall for run in runs["local flags"])
    for way, results in runs.items():
        wall = statistics.median(run.wall for run in results)
        start = statistics.median(run.phases()["start-up and data"] for run in results)
        end = statistics.median(run.phases()["epoch ends"] / args.epochs for run in results)
        exit_ = statistics.median(run.phases()["exit"] for run in results)
        print(f"{way:<16}{wall:>9.2f}{wall / base:>10.1%}{start:>12.2f}{end:>13.3f}{exit_:>8.2f}")
    print("(epoch end s: per epoch; validation, checkpoint, record and, for MOXING, the upload)")


def main() -> None:
    tb.for_each_framework(
        bench, tb.arguments(__doc__, FRAMEWORKS, repeats=3).parse_args(), FRAMEWORKS
    )


if __name__ == "__main__":
    main()
