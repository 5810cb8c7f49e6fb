"""What happens after every step and every epoch, the same for both frameworks."""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from src.scaffold.backend import guards
from src.scaffold.backend.api import Backend
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.errors import Stopped
from src.scaffold.outputs.checkpoints import Retention, name
from src.scaffold.outputs.record import RunRecord
from src.scaffold.run.progress import Progress
from src.scaffold.run.timeline import TIMELINE
from src.scaffold.storage.uploads import Uploader
from src.scaffold.task import Monitor, Task

log = logging.getLogger(__name__)
# An epoch's train loss this many times the first epoch's is reported as diverging.
GROWTH = 10
# A stop signal while steps run waits this long at most for the step's end (Kubernetes gives 30).
GRACE_S = 20.0


class Stop:
    """A stop signal that came while steps ran: taken at the step's end, rank 0 saving a
    checkpoint there first; SIGALRM after GRACE_S takes it wherever the run is."""

    def __init__(self) -> None:
        self.training, self.pending = False, None

    def defer(self, stopped: BaseException) -> bool:
        if self.training:
            self.pending = stopped
            signal.setitimer(signal.ITIMER_REAL, GRACE_S)
        return self.training

    def take(self) -> None:
        if self.pending is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise self.pending


STOP = Stop()


@dataclass
class EarlyStop:
    """config.yaml's early_stop: on the monitored metric, after each validation."""

    monitor: Monitor
    patience: int | None = None
    threshold: float | None = None
    best: float | None = None
    waited: int = 0

    def after(self, score: float) -> str | None:
        """Why the run stops after a validation that scored ``score``; None: it goes on."""
        metric, threshold = self.monitor.metric, self.threshold
        if threshold is not None and not self.monitor.better(threshold, score):
            return f"val {metric} {score:.4g} reached early_stop.threshold {threshold:g}"
        if self.best is None or self.monitor.better(score, self.best):
            self.best, self.waited = score, 0
            return None
        self.waited += 1
        if self.patience is not None and self.waited >= self.patience:
            return (
                f"val {metric} has not improved on {self.best:.4g} for {self.waited} "
                f"validations (early_stop.patience {self.patience})"
            )
        return None


class EpochEnd:
    """The end of an epoch: rank 0 evaluates, saves, records, uploads, and sets ``stopping``;
    a sharded model's ranks evaluate and save with it (backend.collective)."""

    def __init__(
        self,
        backend: Backend,
        task: Task,
        plan: BatchPlan,
        record: RunRecord,
        retention: Retention,
        uploader: Uploader | None,
        epoch_size: int,
        progress: Progress | None = None,
        meta: dict[str, Any] | None = None,
        early: EarlyStop | None = None,
        every: tuple[int | None, int | None] = (None, None),
    ) -> None:
        self.backend, self.task, self.plan, self.record = backend, task, plan, record
        # What checkpoints carry besides the weights: usable without the run that made them.
        self.meta = meta or {}
        self.retention, self.uploader = retention, uploader
        self.epoch_size, self.progress = epoch_size, progress
        self.first_loss: float | None = None
        self.warned = self.stepped = False
        self.lr: Callable[[], float] = lambda: float("nan")
        self.early, self.stopping, self.epoch = early, False, 0
        # validate_every and checkpoint_every, in optimizer steps; the steps taken so far.
        self.validate_every, self.checkpoint_every = every
        epoch, inside = plan.begun
        self.updates = plan.updates_by(plan.steps_done(max(epoch - 1, 0)) + inside)
        self.checkpointed: int | None = None  # the step of the last step checkpoint

    def step(self, step: int, loss: Callable[[], float], lr: Callable[[], float]) -> None:
        """After step ``step`` (1-based, of the run); reading ``loss`` waits for the device."""
        self.lr = lr
        collective = self.backend.collective
        if (progress := self.progress) is None and not collective:
            return  # other ranks go on: rank 0 saves, then the group ends with it
        self._every(step)
        stop = STOP.pending is not None
        if collective and (stop := self.backend.agree(stop)):
            # A stop on any rank: all save at this step (the save is every rank's), then stop;
            # one that came after the vote waits for the next step's.
            STOP.pending = STOP.pending or Stopped(signal.SIGTERM, "SIGTERM on another rank")
        if stop:
            epoch = self.plan.epoch_of(step)
            if not self.backend.inside_epochs:  # MindSpore's Model.train, a data sink
                log.warning(
                    "%s at step %d: the last epoch's checkpoint resumes", STOP.pending, step
                )
            elif step < self.plan.steps_done(epoch) and self.checkpointed != step:
                self._checkpoint(epoch, None, step)  # at an epoch's end: the epoch's own
                log.warning("%s: the checkpoint at step %d is saved", STOP.pending, step)
            STOP.take()
        if progress is None:
            return
        if not self.stepped:
            # The first step of this process: done once its loss is back from the device.
            self.stepped = True
            loss()
            TIMELINE.mark("first step")
            log.info("%s", TIMELINE.summary())
        progress.tick(step)
        if progress.due(step):
            epoch = self.plan.epoch_of(step)
            values = {"loss": loss(), "lr": lr()}
            guards.check_loss(values["loss"], epoch, step, values["lr"])
            shown = f"{epoch}/{self.epoch_size}"
            values["samples_per_s"] = progress.report(step, shown, values["loss"], values["lr"])
            self.record.log("step", values, step, epoch)

    def _every(self, step: int) -> None:
        """validate_every and checkpoint_every: after the optimizer step that reaches a multiple."""
        plan = self.plan
        before, self.updates = self.updates, plan.updates_by(step)
        epoch = plan.epoch_of(step)
        if step >= plan.steps_done(epoch):
            return
        validate, save = self.validate_every, self.checkpoint_every
        if validate is not None and self.updates // validate > before // validate:
            val = self.backend.evaluate("val")  # every rank's where collective
            self.record.log("val", val, step, epoch)
            log.info("step %d (epoch %d)  val %s", step, epoch, _scores(val))
        if save is not None and self.updates // save > before // save:
            self._checkpoint(epoch, None, step)
            self.checkpointed = step

    def __call__(self, epoch: int, train_loss: float, seconds: float) -> None:
        self.epoch = epoch
        step = self.plan.steps_done(epoch)
        # Every rank: the mean over the ranks is the same number everywhere.
        guards.check_loss(train_loss, epoch, step, self.lr())
        if self.backend.rank != 0:
            if self.backend.collective:  # the others' part: the model's forward, the save
                self.backend.evaluate("val")
                self._checkpoint(epoch, None)
            return
        self._watch_growth(epoch, train_loss)
        steps = step - self.plan.steps_done(epoch - 1) - self.plan.skipped(epoch)
        throughput = steps * self.plan.batch_size * self.plan.world_size / max(seconds, 1e-9)
        done = {"loss": train_loss, "lr": self.lr(), "samples_per_s": throughput}
        self.record.log("train", {**done, "seconds": seconds}, step, epoch)
        val = self.backend.evaluate("val")
        self.task.check_metrics(val)
        self.record.log("val", val, step, epoch)
        log.info(
            "epoch %d/%d  train loss %.4f  %.0f samples/s  val %s",
            *(epoch, self.epoch_size, train_loss, throughput, _scores(val)),
        )
        self._checkpoint(epoch, val[self.task.monitor.metric])
        reason = None if self.early is None else self.early.after(val[self.task.monitor.metric])
        if reason is not None:
            self.stopping = True
            log.info("early stop after epoch %d: %s", epoch, reason)
            self.record.log("stop", {}, step, epoch, reason=reason)
        STOP.take()  # a stop signal during the epoch's end: its checkpoint is saved

    def _watch_growth(self, epoch: int, train_loss: float) -> None:
        """One WARNING at GROWTH times the first loss: a divergence before it reaches nan."""
        if self.first_loss is None:
            self.first_loss = train_loss
        elif not self.warned and train_loss > GROWTH * max(self.first_loss, 1e-12):
            self.warned = True
            log.warning(
                "the train loss of epoch %d (%.4g) is over %dx the first epoch's (%.4g): "
                "training diverges; try a lower --lr (now %.3g)",
                *(epoch, train_loss, GROWTH, self.first_loss, self.lr()),
            )

    def _checkpoint(self, epoch: int, score: float | None, step: int | None = None) -> None:
        """The epoch's checkpoint, or one at ``step`` inside it, saved and uploaded."""
        kept = self.retention
        path = kept.directory / name(epoch, self.backend.suffix, kept.model, step)
        done = {"epoch": epoch, "seed": self.plan.seed}
        if step is not None:
            done.update(epoch=epoch - 1, batches=step - self.plan.steps_done(epoch - 1))
        self.backend.save(path, {**done, **self.meta})
        if self.backend.rank != 0:  # a sharded model's rank: its shards saved
            return
        self.record.add_artifact(path)
        for dropped in kept.saved(epoch, score, step):
            self.record.remove_artifact(Path(dropped))
        if self.uploader is not None:
            self.uploader.sync()

    def test(self, epoch: int) -> None:
        """Score the test set once at the end, as eval.py --checkpoint last would (rank 0, and
        a sharded model's other ranks with it)."""
        test = self.backend.evaluate("test")
        last = name(epoch, self.backend.suffix, self.retention.model)
        self.record.log("test", test, self.plan.steps_done(epoch), epoch, checkpoint=last)
        log.info("test (the last checkpoint, %s) %s", last, _scores(test))


def _scores(metrics: dict[str, float]) -> str:
    """Each metric src/step.py returned, as name value: 'loss 0.1234  accuracy 0.9700'."""
    return "  ".join(f"{name} {value:.4f}" for name, value in metrics.items())
