"""Train with Model.train: data sink, and callbacks that log, checkpoint and keep the record."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from mindspore import nn
from mindspore.train import (
    Callback,
    CheckpointConfig,
    FixedLossScaleManager,
    LossMonitor,
    Model,
    ModelCheckpoint,
    RunContext,
    TimeMonitor,
)

from src.checkpoint import checkpoint_path, load_checkpoint
from src.config_ext import MSConfig
from src.dataset import Arrays, EpochBatches, train_dataset
from src.env import Context
from src.errors import ConfigError
from src.model import LeNet5, evaluate
from src.record import RunRecord

log = logging.getLogger(__name__)


class RecordCallback(Callback):
    """Rank 0, after each epoch: test metrics, the run record, the checkpoint as an artifact.

    Model.train counts sinks as epochs: with sinks_per_epoch > 1 only every
    sinks_per_epoch-th of its epochs ends one of ours.
    """

    def __init__(
        self,
        net: nn.Cell,
        test_set: Arrays,
        record: RunRecord,
        cfg: MSConfig,
        steps_per_epoch: int,
        sinks_per_epoch: int,
        global_batch: int,
        after_epoch: Callable[[], None],
    ) -> None:
        super().__init__()
        self.net, self.test_set, self.record, self.cfg = net, test_set, record, cfg
        self.steps_per_epoch = steps_per_epoch
        self.sinks_per_epoch = sinks_per_epoch
        self.global_batch = global_batch
        self.after_epoch = after_epoch
        self.losses: list[float] = []
        self.start = time.perf_counter()
        self.test: dict[str, float] = {}

    def on_train_epoch_begin(self, run_context: RunContext) -> None:
        if (run_context.original_args().cur_epoch_num - 1) % self.sinks_per_epoch == 0:
            self.losses, self.start = [], time.perf_counter()

    def on_train_step_end(self, run_context: RunContext) -> None:
        # With data sink this runs once per sink: the loss of the sink's last step.
        outputs = run_context.original_args().net_outputs
        # With loss scaling the network returns (loss, overflow, scale).
        loss = outputs[0] if isinstance(outputs, tuple | list) else outputs
        self.losses.append(float(loss.asnumpy()))

    def on_train_epoch_end(self, run_context: RunContext) -> None:
        sink_epoch = run_context.original_args().cur_epoch_num
        if sink_epoch % self.sinks_per_epoch:
            return
        epoch = sink_epoch // self.sinks_per_epoch
        elapsed = time.perf_counter() - self.start
        step = epoch * self.steps_per_epoch
        throughput = self.steps_per_epoch * self.global_batch / elapsed
        train_loss = float(np.mean(self.losses))
        self.record.log("train", {"loss": train_loss, "samples_per_s": throughput}, step, epoch)
        self.test = evaluate(self.net, self.test_set.images, self.test_set.labels)
        self.record.log("test", self.test, step, epoch)
        log.info(
            "epoch %d/%d  train loss %.4f  %.0f samples/s  test loss %.4f  accuracy %.4f",
            *(epoch, self.cfg.epoch_size, train_loss, throughput),
            *(self.test["loss"], self.test["accuracy"]),
        )
        # ModelCheckpoint, earlier in the callback list, has written it already.
        path = checkpoint_path(Path(self.cfg.output_dir), epoch, self.steps_per_epoch)
        self.record.add_artifact(path)
        self.after_epoch()


def _sink(cfg: MSConfig, ctx: Context) -> bool:
    """Whether Model.train will sink: MindSpore has no data sink on the CPU.

    There it silently feeds step by step but still counts sink_size steps as
    an epoch; turning sink off keeps the epochs whole.
    """
    if cfg.dataset_sink_mode and ctx.device_target == "CPU":
        log.info("MindSpore has no data sink on the CPU: training without it")
        return False
    return cfg.dataset_sink_mode


def _sinks_per_epoch(sink: bool, sink_size: int, steps: int) -> int:
    if not sink or sink_size == -1:
        return 1
    if steps % sink_size:
        raise ConfigError(f"sink_size {sink_size} must divide the {steps} steps of an epoch")
    return steps // sink_size


def train(
    cfg: MSConfig,
    ctx: Context,
    data: tuple[Arrays, Arrays],
    after_epoch: Callable[[], None] = lambda: None,
) -> dict[str, float]:
    """Train for cfg.epoch_size epochs (continuing cfg.resume); return the last test metrics.

    Only rank 0 evaluates, saves and records; after_epoch runs on it after each epoch.
    """
    train_set, test_set = data
    net = LeNet5()
    # With a fixed loss scale and no overflow check, the optimizer divides the scale out.
    optimizer = nn.Momentum(net.trainable_params(), cfg.lr, cfg.momentum, loss_scale=cfg.loss_scale)
    done, seed = 0, cfg.seed
    if cfg.resume is not None:
        done, seed = load_checkpoint(cfg.resume, net, optimizer)
        if seed != cfg.seed:
            # The data order must continue as it began for the run to match an unbroken one.
            log.warning("continuing with the checkpoint's seed %d, not %d", seed, cfg.seed)
        log.info("resumed from %s after epoch %d", cfg.resume, done)

    source = EpochBatches(
        train_set, cfg.batch_size, ctx.group_size, ctx.rank, seed, first_epoch=done + 1
    )
    sink = _sink(cfg, ctx)
    sinks = _sinks_per_epoch(sink, cfg.sink_size, source.steps)
    record = RunRecord(cfg.output_dir, enabled=ctx.is_main, append=cfg.resume is not None)
    global_batch = cfg.batch_size * ctx.group_size
    launch = {"seed": seed, "world_size": ctx.group_size, "global_batch_size": global_batch}
    loop = {"train_loop": "model", "device": ctx.device_target}
    record.log_hparams(cfg.hparams() | launch | loop)
    log.info("training on %d x %s, %d samples", ctx.group_size, ctx.device_target, len(train_set))
    if done >= cfg.epoch_size:
        log.info("the checkpoint holds %d epochs already: nothing to train", done)
        return evaluate(net, test_set.images, test_set.labels)

    scale = None
    if cfg.loss_scale != 1:
        scale = FixedLossScaleManager(cfg.loss_scale, drop_overflow_update=False)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    # In data parallel mode Model's train cell averages the gradients over the ranks.
    model = Model(net, loss_fn, optimizer, loss_scale_manager=scale)
    callbacks: list[Callback] = []
    recorder = None
    if ctx.is_main:
        config = CheckpointConfig(
            save_checkpoint_steps=source.steps,
            keep_checkpoint_max=cfg.epoch_size,
            append_info=["epoch_num", {"seed": seed, "sinks_per_epoch": sinks}],
        )

        def name(cb_params: Any) -> str:
            # Named by our epoch, as the custom loop names them, whatever the sink size.
            epoch = -(-cb_params.cur_epoch_num // sinks)
            return checkpoint_path(Path(), epoch, source.steps).stem

        recorder = RecordCallback(
            net, test_set, record, cfg, source.steps, sinks, global_batch, after_epoch
        )
        callbacks = [
            # Before the recorder: the checkpoint exists when it is recorded.
            ModelCheckpoint(prefix=name, directory=str(cfg.output_dir), config=config),
            recorder,
            LossMonitor(per_print_times=source.steps),
            TimeMonitor(),
        ]
    model.train(
        # Model.train's epochs are sinks; it runs from initial_epoch to this count.
        cfg.epoch_size * sinks,
        train_dataset(source),
        callbacks=callbacks,
        dataset_sink_mode=sink,
        sink_size=cfg.sink_size if sinks > 1 else -1,
        initial_epoch=done * sinks,
    )
    return recorder.test if recorder else {}
