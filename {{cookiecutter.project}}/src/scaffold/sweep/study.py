"""The sweep: an Optuna study stored in SQLite beside its trials (DIR/sweep/study.db), trials
asked for and run K at a time, the pruner told each validation row; a sweep killed at any
point continues with --resume auto, its interrupted trials resumed from their checkpoints."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path
from typing import Any

from src.scaffold.config import ConfigError
from src.scaffold.sweep import results, trials
from src.scaffold.sweep.place import Place
from src.scaffold.sweep.space import Sweep

log = logging.getLogger(__name__)
STUDY = "study.db"
POLL = 0.5  # seconds between looks at the trials' records
NO_METRIC = "is not among the metrics"  # runner.py's line for a monitor.metric step.py lacks


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as err:
        raise ConfigError("sweep.py needs Optuna: pip install -r requirements-sweep.txt") from err
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def open_study(out: Path, spec: Sweep, seed: int, resume: bool) -> Any:
    """The study of ``out`` (DIR/sweep): a new one, or with ``resume`` the one there."""
    optuna = _optuna()
    db = out / STUDY
    if db.exists() and not resume:
        raise ConfigError(
            f"{out} holds a sweep already: --resume auto continues it, or give another --train_url"
        )
    out.mkdir(parents=True, exist_ok=True)
    samplers = {
        "tpe": lambda: optuna.samplers.TPESampler(seed=seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
        "grid": lambda: _grid(optuna)({d.key: list(d.values) for d in spec.dimensions}, seed=seed),
    }
    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=spec.startup_trials, n_warmup_steps=0)
        if spec.pruner == "median"
        else optuna.pruners.NopPruner()
    )
    return optuna.create_study(
        study_name="sweep",
        storage=f"sqlite:///{db}",
        load_if_exists=True,
        direction=spec.direction,
        sampler=samplers[spec.sampler](),
        pruner=pruner,
    )


def _grid(optuna: Any) -> Any:
    """Optuna's GridSampler, but for its stop once the grid is done: study.optimize's, which
    this loop is not (it counts its trials itself)."""

    class Grid(optuna.samplers.GridSampler):
        def after_trial(self, *args: Any) -> None:
            pass

    return Grid


def _interrupted(study: Any) -> list[int]:
    """Trials a killed sweep left running: failed as interrupted, their options asked again in
    their directories (which resume from their checkpoints)."""
    from optuna.trial import TrialState

    interrupted = list(study.user_attrs.get("interrupted", []))
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(trial.number, state=TrialState.FAIL)
        interrupted.append(trial.number)
        attrs = {"directory": trial.user_attrs.get("directory"), "resumes": trial.number}
        study.enqueue_trial(trial.params, user_attrs=attrs)
        log.info("trial %d was interrupted: it resumes in %s", trial.number, attrs["directory"])
    study.set_user_attr("interrupted", interrupted)
    return interrupted


class Stopping:
    """SIGTERM or SIGINT to the sweep: its trials stop and save, the sweep ends after them."""

    def __init__(self) -> None:
        self.signum: int | None = None
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._take)

    def _take(self, signum: int, _frame: Any) -> None:
        self.signum = signum


def run(
    project: Path,
    where: Place,
    spec: Sweep,
    study: Any,
    places: list[trials.Share],
    argv: list[str],
) -> int:
    """Trials until ``spec.trials`` have ended (finished, pruned or failed); the results, and
    the sweep uploaded where the platform takes it (after each trial, and at the end)."""
    from optuna.trial import TrialState

    out = where.sweep
    interrupted = _interrupted(study)
    ended = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    monitor = ["--monitor_metric", spec.metric]
    monitor += ["--monitor_mode", "max" if spec.direction == "maximize" else "min"]
    stopping, active = Stopping(), []
    while stopping.signum is None:
        done = study.get_trials(deepcopy=False, states=ended)
        count = sum(t.number not in interrupted for t in done)
        free = [slot for slot in range(len(places)) if slot not in {r.slot for r in active}]
        while free and count + len(active) < spec.trials:
            trial = study.ask()
            values = {d.key: d.suggest(trial) for d in spec.dimensions}
            directory = Path(trial.user_attrs.get("directory") or out / str(trial.number))
            trial.set_user_attr("directory", str(directory))
            again = ["--resume", "auto"] if "resumes" in trial.user_attrs else []
            args = [*argv, *spec.flags(values), *monitor, *again]
            url, env = where.trial(directory)
            slot = free.pop(0)
            share = places[slot]
            active.append(trials.launch(project, trial, directory, url, env, args, share, slot))
            log.info("trial %d: %s", trial.number, " ".join(spec.flags(values)))
        if not active:
            break
        time.sleep(POLL)
        for each in list(active):
            _watch(study, spec, each)
            if each.process.poll() is not None:
                active.remove(each)
                _end(study, spec, each, active)
                where.upload()
    if stopping.signum is not None:
        trials.stop(active, signal.SIGTERM)  # left running in the study: --resume auto
        where.upload()
        log.warning("the sweep was stopped: python sweep.py --resume auto continues it")
        return 128 + stopping.signum
    results.write(out, study, spec)
    where.upload(final=True)
    return 0


def shares(parallel: int, ranks: int | None) -> list[trials.Share]:
    """Each trial slot's share of this node: its accelerators divided between the slots (a
    trial's ranks, one a device), else its cores (``ranks`` processes a trial, default 1)."""
    visible, devices = trials.accelerators()
    if devices:
        each = len(devices) // parallel
        if each < 1:
            raise ConfigError(
                f"--parallel {parallel}: this node has {len(devices)} devices ({visible} "
                f"{','.join(devices)}), one at least a trial: give at most {len(devices)}"
            )
        if ranks is not None and ranks != each:
            raise ConfigError(
                f"--ranks {ranks}: a trial's ranks are its devices here, {each} of "
                f"{len(devices)} for {parallel} trials side by side: leave --ranks out"
            )
        cut = [tuple(devices[i * each : (i + 1) * each]) for i in range(parallel)]
        return [trials.Share(devices=d, visible=visible, ranks=each) for d in cut]
    found, ranks = trials.cores(), ranks or 1
    if found and parallel * ranks > len(found):
        raise ConfigError(
            f"--parallel {parallel} trials of {ranks} rank(s): this node has {len(found)} cores "
            f"for them, one at least a rank: give at most {len(found) // ranks} trials"
        )
    each = len(found) // parallel if found else 0
    return [
        trials.Share(tuple(found[i * each : (i + 1) * each]), ranks=ranks) for i in range(parallel)
    ]


def _watch(study: Any, spec: Sweep, each: trials.Running) -> None:
    """Each new validation row told to the pruner; a trial behind the others stopped."""
    for step, value in each.values(spec.metric):
        each.trial.report(value, step)
        if each.pruned is None and each.trial.should_prune():
            each.pruned = (
                f"pruned by the sweep's {spec.pruner} pruner at step {step}: {spec.metric} "
                f"{value:.6g} is behind the median of the trials before at that step"
            )
            each.process.send_signal(signal.SIGTERM)  # it saves and stops, as any run


def _end(study: Any, spec: Sweep, each: trials.Running, active: list[trials.Running]) -> None:
    from optuna.trial import TrialState

    _watch(study, spec, each)  # its last rows
    each.console.close()
    trial, code = each.trial, each.process.returncode
    if each.pruned is not None:
        trials.note_stop(each.directory, each.reported, each.pruned)
        trial.set_user_attr("reason", each.pruned)
        study.tell(trial, state=TrialState.PRUNED)
        log.info("trial %d: %s", trial.number, each.pruned)
        return
    value = trials.best(each.directory, spec.metric, spec.direction == "maximize")
    if code == 0 and value is not None:
        study.tell(trial, value)
        log.info("trial %d finished: %s %.6g", trial.number, spec.metric, value)
        return
    line = trials.error_line(each) if code else f"no validation row holds {spec.metric}"
    if NO_METRIC in line:  # every trial would fail alike: the sweep's own mistake
        trials.stop(active)
        study.tell(trial, state=TrialState.FAIL)
        raise ConfigError(f"sweep.yaml's metric {spec.metric!r}: {line}")
    trial.set_user_attr("error", line)
    study.tell(trial, state=TrialState.FAIL)
    log.warning("trial %d failed: %s (the sweep goes on)", trial.number, line)
