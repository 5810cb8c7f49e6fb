"""The training loop: a hand-written value_and_grad step under ms.jit, gradients all-reduced.

On Ascend and GPUs whole sinks of steps run on the device (ms.data_sink); the
CPU has no data sink and is fed step by step. Loss scaling: dynamic with mixed
precision, else the static loss_scale if any; either way a step whose gradients
are not finite is skipped (all_finite), so one overflow never reaches the weights.
"""

from __future__ import annotations

import logging
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

log = logging.getLogger(__name__)
LOOP = "custom"


_sum = ops.MultitypeFuncGraph("sum")


@_sum.register("Tensor", "Tensor")
def _add(total: ms.Tensor, grad: ms.Tensor) -> ms.Tensor:
    return ops.assign_add(total, grad)


_mean = ops.MultitypeFuncGraph("mean")


@_mean.register("Number", "Tensor")
def _take(window: int, total: ms.Tensor) -> ms.Tensor:
    """The step's mean gradient, and its sum cleared for the next step."""
    mean = total / window
    return ops.depend(mean, ops.assign(total, ops.zeros_like(total)))


class TrainStep(nn.Cell):
    """One batch of training; returns its loss averaged over the ranks. With accumulate,
    a batch's gradients are added to the step's sums, and the batch called with
    ``apply`` takes the optimizer step on their mean over its ``window`` batches.

    A Cell with a jit construct, not a jit function: on the CPU a jit function
    closing over the network runs each step about twice as slowly.
    """

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
        # auto_prefix=False: the parameters keep the network's names.
        super().__init__(auto_prefix=False)
        self.net, self.optimizer, self.scaler = net, optimizer, scaler
        self.loss_fn = loss
        self.scaled = scaler is not None
        self.dynamic = isinstance(scaler, DynamicLossScaler)
        # has_aux: differentiate the first output (the scaled loss), return the plain one too.
        self.grad_fn = ms.value_and_grad(self.forward, None, optimizer.parameters, has_aux=True)
        self.group_size = group_size
        # clip_grad_norm: the averaged, unscaled gradients' global norm clipped before the step.
        self.clip = clip
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
    # taken.
    # window and apply are Python constants too: one graph per pair (at most three).
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
        if self.scaled:
            grads = self.scaler.unscale(grads)
            finite = all_finite(grads)
            if self.dynamic:
                self.scaler.adjust(finite)
            if self.clip is not None:
                grads = ops.clip_by_global_norm(grads, self.clip)
            if finite:
                self.optimizer(grads)
        else:
            if self.clip is not None:
                grads = ops.clip_by_global_norm(grads, self.clip)
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
    train_step = TrainStep(
        backend.net,
        backend.loss_cell(),
        backend.optimizer,
        _scaler(backend),
        backend.world_size,
        backend.options.clip_grad_norm,
        plan.accumulate,
    )
    train_step.set_train(True)
    # The rest of an epoch a run resumes inside is a dataset of its own (MindSpore holds
    # each pass of a dataset to one length); there is no sink then (core.py).
    rest = first + 1 if plan.skipped(first) else first
    dataset, steps = backend.loader.train(plan, rest) if rest <= last else (None, 0)
    sink = backend.sink  # off on the CPU, which has no ms.data_sink
    sinks = sinks_per_epoch(sink, backend.options.sink_size, steps)
    if sink:
        # Each call runs a whole sink of steps on the device and returns its last loss.
        run_sink = ms.data_sink(train_step, dataset, sink_size=steps // sinks)
    else:
        # Each pass over an iterator is one epoch.
        passes = []
        if rest > first:
            passes.append(backend.loader.train(plan, first)[0].create_tuple_iterator(num_epochs=1))
        if dataset is not None:
            passes += [dataset.create_tuple_iterator(num_epochs=last - rest + 1)] * (
                last - rest + 1
            )
    per_call = steps // sinks if sink else 1
    for epoch in range(first, last + 1):
        batches = None if sink else passes[epoch - first]
        start = time.perf_counter()
        done, updates = plan.steps_done(epoch - 1), plan.updates_done(epoch - 1)
        # From the first batch not trained yet (a mid-epoch checkpoint's resume).
        skipped = plan.skipped(epoch)
        # Each call runs a step, or a whole sink of them on the device.
        if sink:
            calls = (run_sink() for _ in range(sinks))
        elif plan.accumulate > 1:
            calls = (
                train_step(inputs, labels, *plan.window(epoch, index))
                for index, (inputs, labels) in enumerate(batches, skipped)
            )
        else:
            calls = (train_step(inputs, labels) for inputs, labels in batches)
        losses = []
        for loss in calls:
            losses.append(loss)
            step = done + skipped + len(losses) * per_call
            # Read only when reported: reading each loss would wait for every step. The
            # optimizer's learning rates are per optimizer step.
            update = updates + -(-(step - done) // plan.accumulate)
            on_epoch_end.step(step, partial(_value, loss), partial(backend.lr_of, update))
        train_loss = float(np.mean([loss.asnumpy() for loss in losses]))
        on_epoch_end(epoch, train_loss, time.perf_counter() - start)
        if backend.any_rank(on_epoch_end.stopping):
            break
