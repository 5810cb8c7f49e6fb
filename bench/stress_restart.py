"""A run SIGKILLed at a random step, its same command rerun, must end with the weights of an
unbroken run: kills out of N that end equal, per framework.

For each framework (PyTorch; MindSpore's custom loop and its Model loop) a project is rendered
once and its command run once, never stopped: the reference. Then N times the same command
(2 epochs of the shipped digits, batch 8, a checkpoint every 15 steps but in Model.train, a
progress line every step; OMP_NUM_THREADS=1 for every run) is started, SIGKILLed once its
progress line reaches a step drawn at random (1 to the last step; at the last, the kill lands
in the epoch's end, the test pass or the exit), and run again exactly as it was, with no
--resume, as a platform restarts a job. The outputs live, in turn, in a local directory, and
at obs://bucket/run through the stand-in moxing, rerun on the same node (in place: the same
TRAIN_CACHE_DIR) or on a fresh one (rescheduled: a new TRAIN_CACHE_DIR). A rerun is equal
when the digest of its final line ("finished, parameters ...") is the reference's.

Per kill: the last step the killed run printed, what the rerun resumed from (a step
checkpoint, an epoch checkpoint, or nothing: started over), the steps it did again, and the
seconds lost: the rerun's wall time less the reference's from that step to its end.

    .venv/bin/python bench/stress_restart.py [--framework pytorch|custom|model] [--kills 20]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from trainbench import REPO, render_project  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.training.runs import FAKE_MOXING, clean_env  # noqa: E402

# Rendered as the training tests render them: (render options).
FRAMEWORKS = {
    "pytorch": {"framework": "pytorch"},
    "custom": {"framework": "mindspore", "target": "ascend", "ms_train_loop": "custom"},
    "model": {"framework": "mindspore", "target": "ascend", "ms_train_loop": "model"},
}
# 161 steps an epoch (1294 training samples, batch 8), a step checkpoint every 15 of them.
FLAGS = ("--device_target", "cpu", "--no_tensorboard", "--epoch_size", "2", "--batch_size", "8")
FLAGS += ("--log_every", "1")
# Model.train resumes at an epoch's start only and refuses --checkpoint_every: its restarts
# continue from the epochs' checkpoints.
EVERY = {"pytorch": ("--checkpoint_every", "15"), "custom": ("--checkpoint_every", "15")}
# One intra-op thread for every run alike: on a loaded machine the default threads make the
# seconds lost mean nothing (bench_watch.py's --threads 1).
THREADS = {"OMP_NUM_THREADS": "1"}
PLACES = ("local", "obs in place", "obs rescheduled")
# A run that takes this long has hung: it is killed and counted as failed.
TIMEOUT = 1800

STEP = re.compile(r"epoch (\d+)/(\d+)\s+step (\d+)/(\d+)\s")
RESUMED = re.compile(r"resumed from (\S+) after epoch (\d+)(?: and (\d+) batches of epoch)?")
DIGEST = re.compile(r"finished, parameters (\w+)")


@dataclass
class Attempt:
    """One train.py process: its output, its wall time, and when it printed each step."""

    status: int
    wall: float
    lines: list[str]
    at_step: dict[int, float]  # step -> seconds from the start when its line came

    @property
    def last_step(self) -> int:
        return max(self.at_step, default=0)

    @property
    def digest(self) -> str | None:
        found = [m[1] for line in self.lines if (m := DIGEST.search(line))]
        return found[-1] if found else None

    def tail(self, n: int = 15) -> str:
        return "\n".join(f"    | {line}" for line in self.lines[-n:])


@dataclass
class Kill:
    """One kill and its rerun."""

    place: str
    argv: list[str]
    url: str
    env: dict[str, str]  # the variables the place adds, the killed run's and the rerun's
    again: dict[str, str]
    target: int  # the step drawn: the run is killed once its line is out
    killed: Attempt
    rerun: Attempt
    resumed: str  # "step", "epoch" or "over"
    resumed_step: int
    lost: float
    equal: bool


def attempt(
    project: Path, argv: list[str], env: dict[str, str], kill_at: int | None = None
) -> Attempt:
    """python ARGV in the project, SIGKILLed once its progress line reaches step kill_at."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    watchdog = threading.Timer(TIMEOUT, proc.kill)
    watchdog.start()
    lines: list[str] = []
    at_step: dict[int, float] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if (m := STEP.search(line)) is not None:
            step = int(m[3])
            at_step[step] = time.perf_counter() - began
            if kill_at is not None and step >= kill_at and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
    status = proc.wait()
    watchdog.cancel()
    return Attempt(status, time.perf_counter() - began, lines, at_step)


def resumed_from(rerun: Attempt, steps_per_epoch: int) -> tuple[str, int]:
    """("step" | "epoch" | "over", the step it continued after), from the rerun's log line."""
    found = [m for line in rerun.lines if (m := RESUMED.search(line))]
    if not found:
        return "over", 0
    epoch, batches = int(found[-1][2]), int(found[-1][3] or 0)
    return ("step" if batches else "epoch"), epoch * steps_per_epoch + batches


def place_env(place: str, root: Path) -> tuple[str, dict[str, str], dict[str, str]]:
    """(train_url, the variables the first run adds, the rerun's) for a kill's directory root."""
    if place == "local":
        return str(root / "out"), {}, {}
    (root / "obs" / "bucket").mkdir(parents=True)
    env = {
        "PYTHONPATH": str(FAKE_MOXING),
        "FAKE_OBS_ROOT": str(root / "obs"),
        "TRAIN_CACHE_DIR": str(root / "cache"),
    }
    # Rescheduled: a fresh node, whose cache holds nothing of the killed run.
    again = env | {"TRAIN_CACHE_DIR": str(root / "cache2")} if "rescheduled" in place else env
    return "obs://bucket/run", env, again


def one_kill(
    project: Path, place: str, target: int, reference: Attempt, root: Path, flags: list[str]
) -> Kill:
    url, env, again = place_env(place, root)
    argv = ["train.py", "--train_url", url, *flags]
    killed = attempt(project, argv, clean_env(**THREADS, **env), kill_at=target)
    rerun = attempt(project, argv, clean_env(**THREADS, **again))
    steps_per_epoch = max(reference.at_step) // 2
    kind, step = resumed_from(rerun, steps_per_epoch)
    # What the reference still had to do after the step the killed run last printed.
    remaining = reference.wall - reference.at_step.get(killed.last_step, 0.0)
    equal = rerun.status == 0 and rerun.digest == reference.digest
    lost = rerun.wall - remaining
    return Kill(place, argv, url, env, again, target, killed, rerun, kind, step, lost, equal)


def report_failure(name: str, project: Path, kill: Kill, root: Path) -> None:
    """What a kill that did not end equal needs to be repeated: the command, its variables,
    the step, both runs' last lines; its directory is kept."""
    url, env, again = kill.url, kill.env, kill.again
    print(f"  FAILED: {name}, killed after step {kill.killed.last_step} ({kill.place})")
    flags = " ".join(kill.argv[3:])
    print(f"    command, in {project}: python train.py --train_url {url} {flags}")
    changed = {key: value for key, value in again.items() if env.get(key) != value}
    print(f"    variables: {shown(THREADS | env)}; the rerun's: {shown(changed) or '(the same)'}")
    print(f"    killed run: exit {kill.killed.status}, its last lines:\n{kill.killed.tail(5)}")
    print(f"    rerun: exit {kill.rerun.status}, digest {kill.rerun.digest}:\n{kill.rerun.tail()}")
    kept = Path(tempfile.gettempdir()) / f"stress_restart_failed_{root.name}"
    shutil.copytree(root, kept, dirs_exist_ok=True)
    print(f"    its directory copied to {kept}", flush=True)


def shown(env: dict[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in env.items())


def stress(name: str, kills: int, seed: int, scratch: Path) -> list[Kill]:
    # Each framework's own draws: the same steps whether run alone or with the others.
    rng = random.Random(f"{seed}:{name}")
    project = render_project(scratch, f"restart_{name}", **FRAMEWORKS[name])
    flags = [*FLAGS, *EVERY.get(name, ())]
    argv = ["train.py", "--train_url", str(scratch / f"ref_{name}"), *flags]
    reference = attempt(project, argv, clean_env(**THREADS))
    if reference.status != 0 or reference.digest is None or not reference.at_step:
        sys.exit(f"error: the reference run of {name} failed:\n{reference.tail()}")
    total = max(reference.at_step)
    print(
        f"{name}: reference {reference.wall:.1f} s, {total} steps, parameters {reference.digest}",
        flush=True,
    )
    print(
        f"  {'kill':>4}  {'place':<16}{'step':>6}  {'resumed from':<14}{'redone':>7}"
        f"{'rerun s':>9}{'lost s':>8}  equal",
        flush=True,
    )
    done: list[Kill] = []
    for i in range(kills):
        place = PLACES[i % len(PLACES)]
        root = scratch / f"{name}_kill{i + 1}"
        kill = one_kill(project, place, rng.randint(1, total), reference, root, flags)
        done.append(kill)
        at = kill.killed.last_step
        what = {"step": f"step {kill.resumed_step}", "epoch": f"epoch end {kill.resumed_step}"}
        # A kill drawn at the last step can come after the run ended on its own.
        was = "" if kill.killed.status == -signal.SIGKILL else f"(exit {kill.killed.status})"
        print(
            f"  {i + 1:>4}  {place:<16}{at:>6}  {what.get(kill.resumed, 'started over'):<14}"
            f"{at - kill.resumed_step:>7}{kill.rerun.wall:>9.1f}{kill.lost:>8.1f}  "
            f"{'yes' if kill.equal else 'NO'} {was}",
            flush=True,
        )
        if not kill.equal:
            report_failure(name, project, kill, root)
        shutil.rmtree(root, ignore_errors=True)
    return done


def summary(name: str, done: list[Kill]) -> None:
    steps = sorted(kill.killed.last_step for kill in done)
    kinds = {kind: sum(kill.resumed == kind for kill in done) for kind in ("step", "epoch", "over")}
    equal = sum(kill.equal for kill in done)
    lost = [kill.lost for kill in done]
    unkilled = sum(kill.killed.status != -signal.SIGKILL for kill in done)
    places = ", ".join(
        f"{place} {sum(k.equal for k in done if k.place == place)}/"
        f"{sum(k.place == place for k in done)}"
        for place in PLACES
    )
    print(
        f"\n{name}: {len(done)} kills" + (f" ({unkilled} not killed by SIGKILL)" * bool(unkilled))
    )
    print(f"  killed at steps: {', '.join(map(str, steps))}")
    print(
        f"  resumed from a step checkpoint {kinds['step']}, an epoch checkpoint {kinds['epoch']}, "
        f"started over {kinds['over']}"
    )
    print(f"  equal to the reference: {equal}/{len(done)} ({places})")
    print(
        "  seconds lost per kill (the rerun less the reference's rest): "
        f"median {statistics.median(lost):.1f}, min {min(lost):.1f}, max {max(lost):.1f}"
    )
    redone = [kill.killed.last_step - kill.resumed_step for kill in done]
    print(
        f"{name}: {equal}/{len(done)} equal; {kinds['step']} from a step checkpoint, "
        f"{kinds['epoch']} from an epoch's, {kinds['over']} started over; "
        f"redone steps median {statistics.median(redone):g} (max {max(redone)}); "
        f"lost median {statistics.median(lost):.1f} s",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--framework", action="append", choices=list(FRAMEWORKS), help="default: all three"
    )
    parser.add_argument("--kills", type=int, default=20, help="kills of each framework")
    parser.add_argument("--seed", type=int, default=0, help="draws the kill steps")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="stress_restart_") as tmp:
        for name in args.framework or FRAMEWORKS:
            results[name] = stress(name, args.kills, args.seed, Path(tmp))
    for name, done in results.items():
        summary(name, done)
    failed = any(not kill.equal for done in results.values() for kill in done)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
