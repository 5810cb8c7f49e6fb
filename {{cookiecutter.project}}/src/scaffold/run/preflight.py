"""The launchers' check before any rank starts: ``python -m src.scaffold.run.preflight
TRAIN_ARGS...`` makes sure this Python has what train.py imports, in the versions
requirements.txt pins, parses train.py's options and checks the output directory as a run
would; one line and exit 2 otherwise, as train.py would. More ranks on this node
(TRAIN_RANKS) than the GPUs or NPUs it shows is one line naming both (before torchrun or
msrun starts any); a CPU-only run of more ranks than CPU cores is a note, with the global
batch. ``--count`` prints the accelerators it shows (for --nproc auto), ``--output-dir``
where train.py writes on this node (for the launchers' logs). Its own imports wait until
the check: the Python may lack them too."""

from __future__ import annotations

import importlib.util
import os
import sys

# The launcher's ranks on this node and nodes in the job.
RANKS_ENV, NODES_ENV = "TRAIN_RANKS", "TRAIN_NODES"
# What train.py imports besides the framework (requirements.txt installs them).
NEEDED = ("numpy", "yaml")


def _missing(framework: str, only: tuple[str, ...] | None = None) -> str | None:
    """The first module train.py needs (or ``only`` those) that this Python cannot import."""
    for name in only or (*NEEDED, framework):
        if importlib.util.find_spec(name) is None:
            return name
    return None


def check(argv: list[str]) -> list[str]:
    """The notes a launch gets; raises TrainError for what stops it."""
    from src.scaffold.backend import FRAMEWORK, ProjectConfig
    from src.scaffold.backend.devices import accelerator_nodes, seen
    from src.scaffold.config import parse_config
    from src.scaffold.data.sharding import cpu_count
    from src.scaffold.errors import DeviceError
    from src.scaffold.outputs.rundir import check_fresh, check_writable
    from src.scaffold.storage.where import outputs

    cfg = parse_config(argv, ProjectConfig)
    # Where train.py will write on this node: the platform's own too (C2Net, obs://'s cache).
    output, _ = outputs(cfg)
    notes = []
    cleared = check_fresh(output, cfg.resume, "--output")
    if cleared:
        notes.append(cleared)
    check_writable(output, "--output")
    ranks, nodes = (int(os.environ.get(name) or 1) for name in (RANKS_ENV, NODES_ENV))
    found = seen(cfg.device_target)
    if found is not None and ranks > found.count:
        fix = f"--nproc {found.count} (or --nproc auto)" if found.count else "--device_target cpu"
        raise DeviceError(
            f"--nproc {ranks} starts {ranks} ranks on this node, but it sees "
            f"{found.describe()}: give {fix}, or run one process with scripts/run_1p.sh"
        )
    cores = cpu_count()
    if ranks > cores and not accelerator_nodes() and cfg.device_target in ("auto", "cpu"):
        total = ranks * nodes
        notes.append(
            f"note: {ranks} ranks on {cores} CPU cores and no GPU or NPU here: each step "
            f"trains a global batch of {total} x {cfg.batch_size} = {total * cfg.batch_size} "
            f"samples, and the ranks share the cores; --nproc {cores} (or scripts/run_1p.sh) "
            f"trains faster here ({FRAMEWORK} on the CPU)"
        )
    return notes


def count() -> int:
    """--nproc auto: the accelerators this node shows (the image's kind first), else 1."""
    from src.scaffold.backend.devices import seen

    found = seen("auto")
    return found.count if found is not None and found.count else 1


def output_dir(argv: list[str]) -> int:
    """--output-dir: where train.py with these arguments writes on this node, for the
    launchers' logs (the platform's directory, C2Net's LOCAL_OUTPUT_PATH, obs://'s cache)."""
    from src.scaffold.backend import ProjectConfig
    from src.scaffold.config import parse_config
    from src.scaffold.errors import TrainError
    from src.scaffold.storage.where import outputs

    try:
        print(outputs(parse_config(argv, ProjectConfig))[0])
    except TrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    from src.scaffold.backend import FRAMEWORK  # the package alone: no options, no yaml

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--count"]:
        print(count())
        return 0
    # --output-dir reads the options only: a dry run works with a Python that has no framework.
    missing = _missing(FRAMEWORK, ("yaml",) if argv[:1] == ["--output-dir"] else None)
    if missing is not None:
        from src.scaffold.backend.guards import no_module  # stdlib only, like this check

        print(f"error: {no_module(missing, sys.executable)}", file=sys.stderr)
        return 2
    from src.scaffold.run.start import pinned_versions  # stdlib only too

    if argv[:1] == ["--output-dir"]:
        return output_dir(argv[1:])
    for line in pinned_versions()[:1]:
        print(f"error: {line}", file=sys.stderr)
        return 2
    from src.scaffold.errors import TrainError

    try:
        notes = check(argv)
    except TrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
