"""The launchers' check before any rank starts (imports, pins, options, output directory, ranks
against devices); ``--count``: the accelerators; ``--output-dir``: where train.py writes."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

RANKS_ENV, NODES_ENV = "TRAIN_RANKS", "TRAIN_NODES"
# What train.py imports besides the framework (requirements.txt installs them).
NEEDED = ("numpy", "yaml")


def check(argv: list[str]) -> list[str]:
    """The notes a launch gets; raises TrainError for what stops it."""
    from src.scaffold.backend import ProjectConfig
    from src.scaffold.config import parse_config
    from src.scaffold.outputs.live import MARKER, take
    from src.scaffold.outputs.rundir import check_writable
    from src.scaffold.storage.where import outputs

    cfg = parse_config(argv, ProjectConfig)
    # Where train.py will write on this node: the platform's own too (C2Net, obs://'s cache).
    output, _ = outputs(cfg)
    ranks, nodes = (int(os.environ.get(name) or 1) for name in (RANKS_ENV, NODES_ENV))
    check_writable(output, "--output")
    # One node's launcher holds the directory for its ranks (rank 0 takes it over); a second
    # launch into it is refused before it writes, whatever its port.
    made = take(output, os.getppid(), "--output") if nodes == 1 else False
    try:
        return _checked(cfg.named(), cfg.places(), output, ranks, nodes)
    except BaseException:
        if nodes == 1:
            (output / MARKER).unlink(missing_ok=True)
            if made:
                with contextlib.suppress(OSError):
                    output.rmdir()
        raise


def _checked(named: Any, places: Any, output: Path, ranks: int, nodes: int) -> list[str]:
    """The checks after the lock: the outputs there, the ranks against the devices."""
    from src.scaffold.backend import FRAMEWORK
    from src.scaffold.backend.devices import accelerator_nodes, seen
    from src.scaffold.data.sharding import cpu_count
    from src.scaffold.errors import DeviceError
    from src.scaffold.outputs.rundir import check_fresh
    from src.scaffold.outputs.truth import restarted

    values = named.values
    batch = values["batch_size"]
    resume, differs = values["resume"], ()
    if resume is None:  # the same command rerun (a restart) continues its run, as auto does
        restart, differs = restarted(named, places)
        resume = "auto" if restart is not None and not differs else None
    cleared = check_fresh(output, resume, "--output", differs)
    notes = [cleared] if cleared else []
    found = seen(values["device_target"])
    if found is not None and ranks > found.count:
        fix = f"--nproc {found.count} (or --nproc auto)" if found.count else "--device_target cpu"
        raise DeviceError(
            f"--nproc {ranks} starts {ranks} ranks on this node, but it sees "
            f"{found.describe()}: give {fix}, or run one process with scripts/run_1p.sh"
        )
    cores = cpu_count()
    if ranks > cores and not accelerator_nodes() and values["device_target"] in ("auto", "cpu"):
        total = ranks * nodes
        notes.append(
            f"note: {ranks} ranks on {cores} CPU cores and no GPU or NPU here: each step "
            f"trains a global batch of {total} x {batch} = {total * batch} "
            f"samples, and the ranks share the cores; --nproc {cores} (or scripts/run_1p.sh) "
            f"trains faster here ({FRAMEWORK} on the CPU)"
        )
    return notes


def output_dir(argv: list[str]) -> list[str]:
    """--output-dir: where train.py writes on this node (C2Net's, obs://'s cache), for logs."""
    from src.scaffold.backend import ProjectConfig
    from src.scaffold.config import parse_config
    from src.scaffold.storage.where import outputs

    return [str(outputs(parse_config(argv, ProjectConfig))[0])]


def main(argv: list[str] | None = None) -> int:
    from src.scaffold.backend import FRAMEWORK  # the package alone: no options, no yaml

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--count"]:  # --nproc auto: the accelerators shown (the image's kind first)
        from src.scaffold.backend.devices import seen

        found = seen("auto")
        print(found.count if found is not None and found.count else 1)
        return 0
    # --output-dir reads the options only: a dry run works with a Python that has no framework.
    dry = argv[:1] == ["--output-dir"]
    needed = ("yaml",) if dry else (*NEEDED, FRAMEWORK)
    if missing := next((n for n in needed if importlib.util.find_spec(n) is None), None):
        from src.scaffold.backend.guards import no_module  # stdlib only, like this check

        print(f"error: {no_module(missing, sys.executable)}", file=sys.stderr)
        return 2
    from src.scaffold.errors import TrainError
    from src.scaffold.run.start import pinned_versions  # stdlib only too

    wrong = [] if dry else pinned_versions()
    if wrong:
        print(f"error: {wrong[0]}", file=sys.stderr)
        return 2
    try:
        notes = output_dir(argv[1:]) if dry else check(argv)
    except TrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
