"""One training run, the same for both frameworks: what train.py's run() and main() do.

Order of a run: the framework's device and process group (the Backend train.py
chose); storage (data onto the node once, outputs' destination); the splits, read by
the Task's readers; where to start (resume or pretrained weights); the epochs, each
ending in src/scaffold/run/epochs.py; the test set; the last upload. A stop (SIGTERM from the
platform's stop button, Ctrl-C) or a failure still uploads what the finished
epochs left before the process exits non-zero.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from src.scaffold.backend import devices
from src.scaffold.backend.api import Backend, Framework
from src.scaffold.backend.schedule import Schedule
from src.scaffold.config import Config
from src.scaffold.data import finder, sharding
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import Splits
from src.scaffold.errors import Stopped, StorageError
from src.scaffold.outputs import checkpoints, live, pretrained, rundir, truth
from src.scaffold.outputs.record import HPARAMS, RunRecord
from src.scaffold.run import ending
from src.scaffold.run.epochs import EarlyStop, EpochEnd
from src.scaffold.run.hostline import host_line
from src.scaffold.run.progress import Progress
from src.scaffold.run.timeline import TIMELINE
from src.scaffold.storage import where as storage
from src.scaffold.storage.uploads import Uploader
from src.scaffold.task import Monitor, Task

log = logging.getLogger("train")
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
# What each rank of a multi-rank run says on stderr once its part is done (scripts/launch_lib.sh).
FINISHED = "training finished"


@contextmanager
def stopping() -> Iterator[None]:
    """Turn the first stop signal into Stopped in the main thread; later ones wait for the
    upload that follows (the platform kills the job after its grace period anyway)."""
    stopped = []

    def handler(signum: int, frame: object) -> None:
        if not stopped:
            stopped.append(signum)
            raise Stopped(signum, signal.Signals(signum).name)
        log.warning("%s again: still saving the outputs", signal.Signals(signum).name)

    signals = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, handler) for signum in signals}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _start(cfg: Config, where: storage.Storage, backend: Backend) -> tuple[int, int, bool, int]:
    """(first epoch, data-order seed, resumed, batches of the first epoch trained already):
    from a checkpoint, else epoch 1 with pretrained weights if any. Resumed also when
    --resume auto finds the record of a run that ended before its first checkpoint: that
    run starts again."""
    path = Path(cfg.resume) if cfg.resume not in (None, "auto") else None
    if cfg.resume == "auto":
        # Fetched from the platform already, where the outputs live there (truth.continuing).
        path = checkpoints.find_latest(where.output, backend.suffix)
        if path is None:
            log.info("--resume auto: no checkpoint in %s yet, starting at epoch 1", where.output)
    if path is not None:
        meta = backend.restore(path)
        if meta["seed"] != cfg.seed:
            # The data order must continue as it began for the run to match an unbroken one.
            log.warning("continuing with the checkpoint's seed %d, not %d", meta["seed"], cfg.seed)
        inside = meta.get("batches", 0)  # a checkpoint_every checkpoint's, inside an epoch
        more = f" and {inside} batches of epoch {meta['epoch'] + 1}" if inside else ""
        log.info("resumed from %s after epoch %d%s", path, meta["epoch"], more)
        return meta["epoch"] + 1, meta["seed"], True, inside
    weights = where.pretrained
    found = weights and pretrained.find_file(weights, backend.suffix, cfg.pretrained is not None)
    if found:
        backend.load_pretrained(found, cfg.skip_layers)
        skipped = f" (kept {', '.join(cfg.skip_layers)} initialised)" if cfg.skip_layers else ""
        log.info("loaded pretrained weights from %s%s", found, skipped)
    again = cfg.resume == "auto" and rundir.run_id_of(where.output) is not None
    return 1, cfg.seed, again, 0


def _check_fresh(resume: Path | str | None, where: storage.Storage) -> None:
    """Stop a new run whose output directory, here or on the platform, holds another run."""
    cleared = rundir.check_fresh(where.output, resume)
    if cleared:
        log.info("%s", cleared)
    rundir.check_writable(where.output)
    remote = where.remote
    if resume is None and remote is not None and remote.holds(HPARAMS):
        raise rundir.refusal(f"{remote.where} holds another run's outputs")


def _run_id(resume: Path | str | None, output: Path) -> str:
    """The run's id: the one its record gives when it continues (--resume), else a new one."""
    return (resume is not None and rundir.run_id_of(output)) or rundir.new_run_id()


def _record(
    cfg: Config, where: storage.Storage, rank: int, after: int | None, run_id: str
) -> RunRecord:
    """The run record of rank 0: TensorBoard files unless turned off; MLflow when the user
    has a server (MLFLOW_TRACKING_URI)."""
    output = where.output
    board = None
    if cfg.tensorboard:
        board = cfg.tensorboard_dir or where.tensorboard or output / rundir.TENSORBOARD
    tracker = None
    if rank == 0:
        from src.scaffold.outputs.tracking import Tracker

        tracker = Tracker.start(run_id, output, after is not None)
    return RunRecord(output, run_id, rank == 0, after, board, tracker)


def _train(
    cfg: Config,
    task: Task,
    where: storage.Storage,
    backend: Backend,
    uploader: Uploader | None,
    asked: dict[str, Any],
) -> None:
    """Train as cfg (resolved to this node's places) says; ``asked``: the options as they
    were given, for the record."""
    smoke = cfg.smoke_sizes(backend.world_size)
    source = cfg.source(where.data)
    splits = finder.splits(cfg.data, source, task.readers, backend.input_shape, smoke)
    TIMELINE.mark("data")
    # A batch larger than the data: said now, before the run starts, in every framework.
    sharding.whole_batches(len(splits.train), cfg.batch_size, backend.world_size)
    place = (backend.world_size, backend.rank)
    plan = BatchPlan(len(splits.train), cfg.batch_size, *place, cfg.seed, cfg.max_steps)
    plan = replace(plan, accumulate=backend.accumulate)
    last = plan.last_epoch(cfg.epoch_size)
    total = plan.steps_done(last)
    # The schedule counts optimizer steps: one per `accumulate` batches.
    schedule = Schedule.of(cfg.schedule, cfg.lr, plan.updates_per_epoch, plan.updates_done(last))
    backend.setup(splits, schedule)
    # The monitored metric among those src/step.py returned on the batch the model was
    # tried on: said before the first step, and before anything is written.
    task.check_metrics(backend.sample_metrics)
    first, seed, resumed, inside = _start(cfg, where, backend)
    plan = replace(plan, seed=seed, begun=(first, inside))
    output = where.output
    if uploader is not None and resumed:
        uploader.mark_present([p.name for p in output.iterdir() if p.is_file()])
    after = plan.steps_done(first - 1) + inside if resumed else None
    record = _record(cfg, where, backend.rank, after, asked["run_id"])
    try:
        span = (first, last, total)
        _epochs(cfg, task, backend, where, splits, plan, record, uploader, span, asked)
    except BaseException:
        record.finish(failed=True)
        raise
    record.finish(failed=False)
    # Every rank's last word: ranks that trained as one hold the same parameters (buffers,
    # such as BatchNorm's running statistics, are each rank's own and may differ).
    print(f"{backend.placement}: finished, parameters {backend.weights_digest()}", flush=True)


def _epochs(
    cfg: Config,
    task: Task,
    backend: Backend,
    where: storage.Storage,
    splits: Splits,
    plan: BatchPlan,
    record: RunRecord,
    uploader: Uploader | None,
    span: tuple[int, int, int],
    asked: dict[str, Any],
) -> None:
    """Log what the run is, train epochs first..last (of ``total`` steps), test."""
    first, last, total = span
    launch = {"seed": plan.seed, "world_size": backend.world_size, "device": backend.device}
    launch["global_batch_size"] = cfg.batch_size * backend.world_size
    # Where the data and outputs were on this node (the options keep what was asked: auto).
    launch.update(data_url=str(where.data), train_url=str(where.output))
    sizes = {f"{name}_samples": len(getattr(splits, name)) for name in ("train", "val", "test")}
    resolved = {**launch, **splits.info.record(), **sizes, **backend.describe()}
    options = {key: value for key, value in asked.items() if key != "run_id"}
    record.log_hparams({**options, "resolved": resolved})
    name, keep = task.model(cfg.model).name, cfg.keep_checkpoints
    retention = checkpoints.Retention.resume(where.output, backend.suffix, keep, name, task.monitor)
    global_batch = launch["global_batch_size"]
    progress = None
    if backend.rank == 0:
        bar = sys.stdout.isatty()
        begun = plan.steps_done(first - 1) + plan.skipped(first)
        progress = Progress(total, begun, cfg.log_every, global_batch, bar)
    meta = {"model_name": name, **splits.info.checkpoint_meta()}
    early = EarlyStop.asked(task.monitor, cfg.early_stop.patience, cfg.early_stop.threshold)
    every = (cfg.validate_every, cfg.checkpoint_every)
    hook = EpochEnd(
        backend,
        task,
        plan,
        record,
        retention,
        uploader,
        cfg.epoch_size,
        progress,
        meta,
        early,
        every,
    )
    log.info(
        "training on %d x %s: %d samples, %d held out for validation, %d for the test",
        *(backend.world_size, backend.device, *sizes.values()),
    )
    TIMELINE.mark("model")
    if first <= last:
        with progress.shown() if progress is not None else contextlib.nullcontext():
            backend.fit(first, last, plan, hook)
    else:
        log.info("the checkpoint holds %d epochs already: nothing to train", first - 1)
    if backend.rank == 0:
        # The last epoch trained (an early stop's), else the one the run already held.
        hook.test(hook.epoch or first - 1)


class _Format(logging.Formatter):
    """The time and the message; from WARNING up the level too, so warnings stand out."""

    def format(self, record: logging.LogRecord) -> str:
        record.level = f"{record.levelname} " if record.levelno >= logging.WARNING else ""
        return super().format(record)


def _configure_logging(rank: int) -> None:
    # Only rank 0 reports progress; the others speak up for warnings.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Format("%(asctime)s %(level)s%(message)s"))
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, handlers=[handler])


def _upload_on_the_way_out(uploader: Uploader | None) -> None:
    """The last upload of a failed or stopped run: its failure is logged, not raised, so the
    reason the run ended stays the error reported."""
    if uploader is not None:
        try:
            uploader.sync(final=True)
        except StorageError as err:
            log.error("could not upload the outputs: %s", err)


def _announce(cfg: Config, backend: Backend, adopted: truth.Adopted) -> None:
    """The first lines of a rank's log: where it stands (the first line to read when ranks
    disagree), the run's own options where a resumed run took them, the devices, the host."""
    _configure_logging(backend.rank)
    print(backend.placement, flush=True)
    adopted.log(log)
    if backend.unseen:
        log.warning("%s", backend.unseen)
    idle = devices.idle(backend.device, backend.world_size)
    if idle:
        log.warning("%s", idle)
    checked = host_line(cfg.strict)  # in the project's images only
    if checked:
        (log.warning if checked[1] else log.info)("%s", checked[0])
    if cfg.ignored_args:
        log.info("platform arguments, accepted and not used: %s", ", ".join(cfg.ignored_args))


def backend_of(framework: Framework, cfg: Config, task: Task) -> Backend:
    """The framework's Backend, given the options it reads (its OPTIONS, by name) and those
    src/step.py's optimizer names."""
    args = task.step.optimizer_args(cfg.named().values)
    return framework.create(cfg.pick(framework.OPTIONS, optimizer=args), task)


def run(task: Task, cfg: Config, framework: Framework) -> None:
    """Train ``task`` as cfg says with the Backend the framework's core module creates;
    raises TrainError subclasses for what the user must fix."""
    TIMELINE.mark("interpreter and imports")
    # A resumed run continues with its own options and model (its record), not config.yaml's.
    adopted = truth.continuing(cfg.named(), cfg.places(), framework)
    cfg = cfg.with_options(**adopted.changes)
    task = replace(task, monitor=Monitor(cfg.monitor.metric, cfg.monitor.mode))
    task.monitor.check()
    backend = backend_of(framework, cfg, task)
    TIMELINE.mark("device")
    try:
        if backend.scheduler_only:
            return
        backend.ahead()
        _announce(cfg, backend, adopted)
        with stopping():
            asked = cfg.hparams()
            # This node's places: what the options asked for, resolved (they keep auto).
            where = storage.prepare(cfg.places())
            marker = None
            if backend.rank == 0:
                # Before anything is written: a new run never mixes with another's outputs.
                _check_fresh(cfg.resume, where)
            asked["run_id"] = _run_id(cfg.resume, where.output)
            if backend.rank == 0:
                marker = live.Marker(where.output, asked["run_id"])
            uploader = (
                Uploader(where.output, where.remote, where.uploads) if backend.rank == 0 else None
            )
            try:
                _train(cfg, task, where, backend, uploader, asked)
            except BaseException:
                _upload_on_the_way_out(uploader)
                raise
            finally:
                if marker is not None:
                    marker.remove()
            try:
                if uploader is not None:
                    uploader.sync(final=True)
            except Stopped:
                _upload_on_the_way_out(uploader)  # stopped during the last upload: finish it
                raise
        if backend.world_size > 1:
            # The launchers read it: a rank that dies after this line died leaving the group.
            print(f"rank {backend.rank}: {FINISHED}", file=sys.stderr, flush=True)
        else:
            ending.trained_alone()
    finally:
        backend.close()
