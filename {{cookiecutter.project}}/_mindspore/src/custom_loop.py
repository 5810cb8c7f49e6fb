"""Train with a hand-written loop: a value_and_grad step under ms.jit, gradients all-reduced."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.amp import StaticLossScaler

from src.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from src.config_ext import MSConfig
from src.dataset import Arrays, EpochBatches, train_dataset
from src.env import Context
from src.model import LeNet5, evaluate
from src.record import RunRecord

log = logging.getLogger(__name__)


class TrainStep(nn.Cell):
    """One optimisation step; returns the batch loss averaged over the ranks.

    With loss_scale > 1 the loss is multiplied before differentiation and the
    gradients divided after it, so that float16 gradients do not underflow.
    A Cell with a jit construct, not a jit function: on the CPU a jit function
    closing over the network runs each step about twice as slowly.
    """

    def __init__(
        self, net: nn.Cell, optimizer: nn.Optimizer, loss_scale: float, group_size: int
    ) -> None:
        # auto_prefix=False: the parameters keep the network's names.
        super().__init__(auto_prefix=False)
        self.net = net
        self.optimizer = optimizer
        self.loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        self.scaled = loss_scale != 1
        self.scaler = StaticLossScaler(loss_scale)
        # has_aux: differentiate the first output (the scaled loss), return the plain one too.
        self.grad_fn = ms.value_and_grad(self.forward, None, optimizer.parameters, has_aux=True)
        self.group_size = group_size
        if group_size > 1:
            # Averages the gradients over the ranks (gradients_mean is set by init_env).
            self.reducer = nn.DistributedGradReducer(optimizer.parameters)
            self.all_reduce = ops.AllReduce()

    def forward(self, images: ms.Tensor, labels: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
        loss = self.loss_fn(self.net(images), labels)
        return (self.scaler.scale(loss) if self.scaled else loss), loss

    # scaled and group_size are constants: the compiled step holds only the branches taken.
    @ms.jit
    def construct(self, images: ms.Tensor, labels: ms.Tensor) -> ms.Tensor:
        (_, loss), grads = self.grad_fn(images, labels)
        if self.scaled:
            grads = self.scaler.unscale(grads)
        if self.group_size > 1:
            grads = self.reducer(grads)
            loss = self.all_reduce(loss) / self.group_size
        self.optimizer(grads)
        return loss


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
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=cfg.lr, momentum=cfg.momentum)
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
    record = RunRecord(cfg.output_dir, enabled=ctx.is_main, append=cfg.resume is not None)
    global_batch = cfg.batch_size * ctx.group_size
    launch = {"seed": seed, "world_size": ctx.group_size, "global_batch_size": global_batch}
    loop = {"train_loop": "custom", "device": ctx.device_target}
    record.log_hparams(cfg.hparams() | launch | loop)
    log.info("training on %d x %s, %d samples", ctx.group_size, ctx.device_target, len(train_set))
    if done >= cfg.epoch_size:
        log.info("the checkpoint holds %d epochs already: nothing to train", done)
        return evaluate(net, test_set.images, test_set.labels)

    step = TrainStep(net, optimizer, cfg.loss_scale, ctx.group_size)
    step.set_train(True)
    test: dict[str, float] = {}  # what the other ranks return: rank 0 alone evaluates
    iterator = train_dataset(source).create_tuple_iterator(num_epochs=cfg.epoch_size - done)
    for epoch in range(done + 1, cfg.epoch_size + 1):
        start = time.perf_counter()
        # Read once the epoch is done: reading each loss would wait for every step.
        losses = [step(images, labels) for images, labels in iterator]
        train_loss = float(np.mean([loss.asnumpy() for loss in losses]))
        elapsed = time.perf_counter() - start
        if not ctx.is_main:
            continue
        total_steps = epoch * source.steps
        throughput = source.steps * global_batch / elapsed
        record.log("train", {"loss": train_loss, "samples_per_s": throughput}, total_steps, epoch)
        test = evaluate(net, test_set.images, test_set.labels)
        record.log("test", test, total_steps, epoch)
        log.info(
            "epoch %d/%d  train loss %.4f  %.0f samples/s  test loss %.4f  accuracy %.4f",
            *(epoch, cfg.epoch_size, train_loss, throughput, test["loss"], test["accuracy"]),
        )
        path = checkpoint_path(cfg.output_dir, epoch, source.steps)
        record.add_artifact(save_checkpoint(path, net, optimizer, epoch, seed))
        after_epoch()
    return test
