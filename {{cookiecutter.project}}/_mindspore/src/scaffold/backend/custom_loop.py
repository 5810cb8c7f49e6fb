"""The training loop: a value_and_grad step under ms.jit, sinks of steps run by ms.data_sink but on
the CPU; loss scaling dynamic with amp, else loss_scale; a step that overflows is skipped."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.amp import DynamicLossScaler, StaticLossScaler, all_finite

from src.scaffold.backend.api import EpochEnd
from src.scaffold.backend.loader import sinks_per_epoch
from src.scaffold.data.sharding import BatchPlan

LOOP = "custom"
_sum = ops.MultitypeFuncGraph("sum")
_mean = ops.MultitypeFuncGraph("mean")


@_sum.register("Tensor", "Tensor")
def _add(total: ms.Tensor, grad: ms.Tensor) -> ms.Tensor:
    return ops.assign_add(total, grad)


@_mean.register("Number", "Tensor")
def _take(window: int, total: ms.Tensor) -> ms.Tensor:
    """The step's mean gradient, and its sum cleared for the next step."""
    mean = total / window
    return ops.depend(mean, ops.assign(total, ops.zeros_like(total)))


class TrainStep(nn.Cell):
    """One batch's step; returns its loss averaged over the ranks. With ``apply`` it steps on the
    mean gradient of ``window`` batches. A Cell: a jit function runs twice as slowly on the CPU."""

    def __init__(
        self,
        net: nn.Cell,
        loss: nn.Cell,
        optimizer: nn.Optimizer,
        scaler: Any,
        group_size: int,
        clip: float | None = None,
        accumulate: int = 1,
    ) -> None:
        super().__init__(auto_prefix=False)  # the parameters keep the network's names
        self.net, self.optimizer, self.scaler, self.loss_fn = net, optimizer, scaler, loss
        self.scaled, self.dynamic = scaler is not None, isinstance(scaler, DynamicLossScaler)
        # has_aux: differentiate the first output (the scaled loss), return the plain one too.
        self.grad_fn = ms.value_and_grad(self.forward, None, optimizer.parameters, has_aux=True)
        # clip: clip_grad_norm, the averaged, unscaled gradients' global norm before the step.
        self.group_size, self.clip = group_size, clip
        self.accumulating = accumulate > 1
        if self.accumulating:
            self.sums = optimizer.parameters.clone(prefix="accumulated", init="zeros")
            self.hyper_map = ops.HyperMap()
        if group_size > 1:
            # Averages the gradients over the ranks (gradients_mean is set by init_env).
            self.reducer = nn.DistributedGradReducer(optimizer.parameters)
            self.all_reduce = ops.AllReduce()

    def forward(self, images: ms.Tensor, labels: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
        loss = self.loss_fn(images, labels)  # src/step.py's train_step
        return (self.scaler.scale(loss) if self.scaled else loss), loss

    # scaled, dynamic, group_size and clip are constants: the compiled step keeps the branches
    # taken. window and apply are Python constants too: one graph per pair (at most three).
    @ms.jit
    def construct(
        self, images: ms.Tensor, labels: ms.Tensor, window: int = 1, apply: bool = True
    ) -> ms.Tensor:
        (_, loss), grads = self.grad_fn(images, labels)
        if self.group_size > 1:
            loss = self.all_reduce(loss) / self.group_size
        if self.accumulating:
            grads = self.hyper_map(_sum, self.sums, grads)
            if not apply:
                return loss
            grads = self.hyper_map(ops.partial(_mean, window), self.sums)
        if self.group_size > 1:
            grads = self.reducer(grads)
        finite = True
        if self.scaled:
            grads = self.scaler.unscale(grads)
            finite = all_finite(grads)
            if self.dynamic:
                self.scaler.adjust(finite)
        if self.clip is not None:
            grads = ops.clip_by_global_norm(grads, self.clip)
        if finite:
            self.optimizer(grads)
        return loss


def _value(loss: ms.Tensor) -> float:
    return float(loss.asnumpy())


def _scaler(backend: Any) -> Any:
    if backend.amp:
        return DynamicLossScaler(scale_value=2.0**16, scale_factor=2, scale_window=50)
    if backend.options.loss_scale != 1:
        return StaticLossScaler(backend.options.loss_scale)
    return None


def fit(backend: Any, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
    """Train epochs first..last of ``backend`` (a MindSporeBackend) with TrainStep."""
    scaler, clip = _scaler(backend), backend.options.clip_grad_norm
    cells = (backend.net, backend.loss_cell(), backend.optimizer)
    # Sharded (semi-automatic parallel), MindSpore inserts the gradients' reduction itself;
    # each rank's loss is then its own batch's.
    reduced = 1 if backend.collective else backend.world_size
    train_step = TrainStep(*cells, scaler, reduced, clip, plan.accumulate)
    train_step.set_train(True)
    # The rest of an epoch a run resumes inside is a dataset of its own (MindSpore holds each
    # pass of a dataset to one length); there is no sink then (options.py).
    rest = first + 1 if plan.skipped(first) else first
    dataset, steps = backend.loader.train(plan, rest) if rest <= last else (None, 0)
    sink = backend.sink  # off on the CPU, which has no ms.data_sink
    sinks = sinks_per_epoch(sink, backend.options.sink_size, steps)
    per_call = steps // sinks if sink else 1
    if sink:  # each call runs a whole sink of steps on the device and returns its last loss
        run_sink = ms.data_sink(train_step, dataset, sink_size=per_call)
    else:  # each pass over an iterator is one epoch
        passes = []
        if rest > first:
            passes.append(backend.loader.train(plan, first)[0].create_tuple_iterator(num_epochs=1))
        if dataset is not None:
            count = last - rest + 1
            passes += [dataset.create_tuple_iterator(num_epochs=count)] * count
    for epoch in range(first, last + 1):
        start = time.perf_counter()
        done, updates = plan.steps_done(epoch - 1), plan.updates_done(epoch - 1)
        skipped = plan.skipped(epoch)  # batches trained before a mid-epoch checkpoint
        if sink:
            calls = (run_sink() for _ in range(sinks))
        else:  # window (1, True) without accumulate
            batches = enumerate(passes[epoch - first], skipped)
            calls = (train_step(*batch, *plan.window(epoch, index)) for index, batch in batches)
        losses = []
        for loss in calls:
            losses.append(loss)
            step = done + skipped + len(losses) * per_call
            # Read only when reported: reading each loss would wait for every step.
            update = updates + -(-(step - done) // plan.accumulate)
            on_epoch_end.step(step, partial(_value, loss), partial(backend.lr_of, update))
        train_loss = float(np.mean([loss.asnumpy() for loss in losses]))
        on_epoch_end(epoch, train_loss, time.perf_counter() - start)
        if backend.any_rank(on_epoch_end.stopping):
            break
