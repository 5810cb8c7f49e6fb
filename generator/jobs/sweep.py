"""`gen job render --sweep`: the job runs the project's sweep (its sweep.py) on one node."""

from __future__ import annotations

from generator.errors import OptionError


def sweep_parallel(sweep: bool, parallel: int | None, nnodes: int, devices: int) -> int:
    """The trials side by side (1 unless --parallel), checked against the one node; 0 when
    the job trains once."""
    if not sweep:
        if parallel is not None:
            raise OptionError("--parallel", "is for --sweep (trials side by side)")
        return 0
    if nnodes != 1:
        raise OptionError(
            "--nnodes", f"{nnodes}: a sweep runs its trials on one node's devices; give 1"
        )
    parallel = 1 if parallel is None else parallel
    if not 1 <= parallel <= devices:
        raise OptionError(
            "--parallel",
            f"{parallel}: the node's {devices} devices allow 1 to {devices} trials side by side",
        )
    return parallel
