"""One training run, the same for both frameworks, from the device to the last upload; a stop
(SIGTERM, Ctrl-C) or a failure still uploads what the finished epochs left."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from src.scaffold.backend import devices
from src.scaffold.backend.api import Backend, Framework
from src.scaffold.backend.schedule import Schedule
from src.scaffold.config import Config
from src.scaffold.data import finder, sharding
from src.scaffold.data.splits import Splits
from src.scaffold.errors import Stopped, StorageError
from src.scaffold.outputs import checkpoints, live, pretrained, rundir, truth
from src.scaffold.outputs.record import HPARAMS, RunRecord
from src.scaffold.run import ending, hostline
from src.scaffold.run.epochs import STOP, EarlyStop, EpochEnd
from src.scaffold.run.progress import Progress
from src.scaffold.run.timeline import TIMELINE
from src.scaffold.storage import where as storage
from src.scaffold.storage.uploads import Uploader
from src.scaffold.task import Monitor, Task

log = logging.getLogger("train")
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
# What each rank of a multi-rank run says on stderr once its part is done (scripts/launch_lib.sh).
FINISHED = "training finished"


@contextlib.contextmanager
def stopping() -> Iterator[None]:
    """The first stop signal raises Stopped in the main thread; later ones wait for the upload."""
    stopped = []

    def handler(signum: int, frame: object) -> None:
        if not stopped:
            stopped.append(signum)
            if not STOP.defer(err := Stopped(signum, signal.Signals(signum).name)):
                raise err  # while steps run: at the step's end, after a checkpoint
            return
        log.warning("%s again: still saving the outputs", signal.Signals(signum).name)

    def overdue(signum: int, frame: object) -> None:
        STOP.take()  # the step did not end within epochs.GRACE_S

    signals = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, handler) for signum in signals}
    previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, overdue)
    try:
        yield
    except Exception as err:
        if STOP.pending is None:
            raise
        # Another rank stopped first: this one's collective failed on its way out.
        raise STOP.pending from err
    finally:
        STOP.training, STOP.pending = False, None
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, old in previous.items():
            signal.signal(signum, old)


def _start(cfg: Config, where: storage.Storage, backend: Backend) -> tuple[int, int, bool, int]:
    """(first epoch, seed, resumed, batches of it done): a checkpoint's, else epoch 1 (and
    pretrained weights); resumed also where --resume auto finds a run with no checkpoint."""
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


def _train(
    cfg: Config,
    task: Task,
    where: storage.Storage,
    backend: Backend,
    uploader: Uploader | None,
    asked: dict[str, Any],
) -> None:
    """Train as cfg says; ``asked``: the options as they were given, for the record."""
    source, smoke = cfg.source(where.data), cfg.smoke_sizes(backend.world_size)
    splits = finder.splits(
        cfg.data, source, task.readers, backend.input_shape, smoke, backend.spec.ids
    )
    TIMELINE.mark("data")
    # A batch larger than the data: said now, before the run starts, in every framework.
    sharding.whole_batches(len(splits.train), cfg.batch_size, backend.world_size)
    place = (backend.world_size, backend.rank, cfg.seed, cfg.max_steps)
    plan = sharding.BatchPlan(
        len(splits.train), cfg.batch_size, *place, accumulate=backend.accumulate
    )
    last = plan.last_epoch(cfg.epoch_size)
    total = plan.steps_done(last)
    # The schedule counts optimizer steps: one per `accumulate` batches.
    schedule = Schedule.of(cfg.schedule, cfg.lr, plan.updates_per_epoch, plan.updates_done(last))
    backend.setup(splits, schedule)
    # The monitored metric among src/step.py's on the trial batch: said before anything is written.
    task.check_metrics(backend.sample_metrics)
    first, seed, resumed, inside = _start(cfg, where, backend)
    plan = replace(plan, seed=seed, begun=(first, inside))
    output, run_id, rank = where.output, asked["run_id"], backend.rank
    if uploader is not None and resumed:
        uploader.mark_present([p.name for p in output.iterdir() if p.is_file()])
    after = plan.steps_done(first - 1) + inside if resumed else None
    board = None
    if cfg.tensorboard:
        board = cfg.tensorboard_dir or where.tensorboard or output / rundir.TENSORBOARD
    tracker = None
    if rank == 0:
        from src.scaffold.outputs.tracking import Tracker

        tracker = Tracker.start(run_id, output, after is not None)
    record = RunRecord(output, run_id, rank == 0, after, board, tracker)
    try:
        span = (first, last, total)
        _epochs(cfg, task, backend, where, splits, plan, record, uploader, span, asked)
    except BaseException:
        record.finish(failed=True)
        raise
    record.finish(failed=False)
    # Every rank's last word: ranks that trained as one hold the same parameters.
    print(f"{backend.placement}: finished, parameters {backend.weights_digest()}", flush=True)


def _epochs(
    cfg: Config,
    task: Task,
    backend: Backend,
    where: storage.Storage,
    splits: Splits,
    plan: sharding.BatchPlan,
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
    name, keep = backend.spec.name, cfg.keep_checkpoints
    policy = checkpoints.Retention.resume(where.output, backend.suffix, keep, name, task.monitor)
    progress = None
    if backend.rank == 0:
        begun = plan.steps_done(first - 1) + plan.skipped(first)
        batch = launch["global_batch_size"]
        progress = Progress(total, begun, cfg.log_every, batch, sys.stdout.isatty())
    meta = _meta(cfg, name, splits)
    # With neither patience nor threshold set (early_stop off) it never stops the run.
    early = EarlyStop(task.monitor, cfg.early_stop.patience, cfg.early_stop.threshold)
    hook = EpochEnd(
        backend,
        task,
        plan,
        record,
        policy,
        uploader,
        cfg.epoch_size,
        progress,
        meta,
        early,
        (cfg.validate_every, cfg.checkpoint_every),
    )
    shown = (backend.world_size, backend.device, *sizes.values())
    log.info("training on %d x %s: %d samples, %d held out for validation, %d for the test", *shown)
    TIMELINE.mark("model")
    if first <= last:
        with progress.shown() if progress is not None else contextlib.nullcontext():
            STOP.training = True
            backend.fit(first, last, plan, hook)
            STOP.training = False  # a stop after the last step: taken now
            STOP.take()
    else:
        log.info("the checkpoint holds %d epochs already: nothing to train", first - 1)
    if backend.rank == 0 or backend.collective:
        # The last epoch trained (an early stop's), else the one the run already held.
        hook.test(hook.epoch or first - 1)


def _meta(cfg: Config, name: str, splits: Splits) -> dict[str, Any]:
    """What checkpoints carry besides the weights: usable without the run that made them."""
    meta = {"model_name": name, "model_args": cfg.model_args, **splits.info.checkpoint_meta()}
    if cfg.init_from is not None:  # the model (and tokenizer) the checkpoint builds on
        meta["init_from"] = str(cfg.init_from.absolute())
    return meta


class _Format(logging.Formatter):
    """The time and the message; from WARNING up the level too, so warnings stand out."""

    def format(self, record: logging.LogRecord) -> str:
        record.level = f"{record.levelname} " if record.levelno >= logging.WARNING else ""
        return super().format(record)


def _upload_on_the_way_out(uploader: Uploader | None) -> None:
    """A failed or stopped run's last upload: its failure is logged, not raised."""
    if uploader is not None:
        try:
            uploader.sync(final=True)
        except StorageError as err:
            log.error("could not upload the outputs: %s", err)


def _announce(cfg: Config, backend: Backend, adopted: truth.Adopted) -> None:
    """A rank's first lines: where it stands, the options a resumed run took, the devices."""
    # Only rank 0 reports progress; the others speak up for warnings.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Format("%(asctime)s %(level)s%(message)s"))
    level = logging.INFO if backend.rank == 0 else logging.WARNING
    logging.basicConfig(level=level, handlers=[handler])
    print(backend.placement, flush=True)
    for line in adopted.lines():
        log.info("%s", line)
    if backend.unseen:
        log.warning("%s", backend.unseen)
    if idle := devices.idle(backend.device, backend.world_size):
        log.warning("%s", idle)
    if checked := hostline.host_line(cfg.strict):  # in the project's images only
        (log.warning if checked[1] else log.info)("%s", checked[0])
    if cfg.ignored_args:
        log.info("platform arguments, accepted and not used: %s", ", ".join(cfg.ignored_args))


def _claim(cfg: Config, where: storage.Storage, differs: tuple[str, ...]) -> live.Marker:
    """Rank 0's lock on the output directory, before anything is written; then the check
    that a new run never mixes with another's outputs (released if that refuses)."""
    rundir.check_writable(where.output)
    marker = live.Marker(where.output)
    try:
        if cleared := rundir.check_fresh(where.output, cfg.resume, None, differs):
            log.info("%s", cleared)
        remote = where.remote  # the platform's side
        if cfg.resume is None and remote is not None and remote.holds(HPARAMS):
            raise rundir.refusal(f"{remote.where} holds another run's outputs", None, differs)
    except BaseException:
        marker.remove()
        raise
    return marker


def backend_of(framework: Framework, cfg: Config, task: Task) -> Backend:
    """The framework's Backend, given its OPTIONS and those src/step.py's optimizer names."""
    args = task.step.optimizer_args(cfg.named().values)
    return framework.create(cfg.pick(framework.OPTIONS, optimizer=args), task)


def run(task: Task, cfg: Config, framework: Framework) -> None:
    """Train ``task`` as cfg says with the framework's Backend; TrainError: the user's to fix."""
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
            where = storage.prepare(cfg.places())
            marker = _claim(cfg, where, adopted.differs) if backend.rank == 0 else None
            uploader = None
            try:
                previous = rundir.run_id_of(where.output) if cfg.resume is not None else None
                asked["run_id"] = previous or rundir.new_run_id()
                if marker is not None:
                    marker.name(asked["run_id"])
                    uploader = Uploader(where.output, where.remote, where.uploads)
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
