"""The training loop: MindSpore's Model.train, with data sink and a callback per epoch.

Model.train counts sinks as epochs: with sink_size steps per sink, one of our
epochs is sinks_per_epoch of its. Loss scaling: dynamic with mixed precision
(steps whose gradients overflow are skipped and the scale lowered), else the
static loss_scale, if any.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from mindspore.train import (
    Callback,
    DynamicLossScaleManager,
    FixedLossScaleManager,
    Model,
    RunContext,
)

from src.scaffold.backend.api import EpochEnd
from src.scaffold.backend.loader import sinks_per_epoch
from src.scaffold.data.sharding import BatchPlan

log = logging.getLogger(__name__)
LOOP = "model"


class EpochCallback(Callback):
    """Collects each step's loss, reports it to on_epoch_end.step, and hands every finished
    epoch of ours to on_epoch_end."""

    def __init__(
        self, on_epoch_end: EpochEnd, sinks: int, backend: Any, done: int, per_call: int
    ) -> None:
        super().__init__()
        self.on_epoch_end, self.sinks = on_epoch_end, sinks
        self.losses: list[float] = []
        self.start = time.perf_counter()
        # Steps before this start, and per callback: 1, or a whole sink's with data sink.
        self.step, self.per_call, self.backend = done, per_call, backend

    def on_train_epoch_begin(self, run_context: RunContext) -> None:
        if (run_context.original_args().cur_epoch_num - 1) % self.sinks == 0:
            self.losses, self.start = [], time.perf_counter()

    def on_train_step_end(self, run_context: RunContext) -> None:
        # With data sink this runs once per sink: the loss of the sink's last step.
        outputs = run_context.original_args().net_outputs
        # With loss scaling the network returns (loss, overflow, scale).
        loss = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        self.losses.append(float(loss.asnumpy()))
        self.step += self.per_call
        step = self.step
        self.on_epoch_end.step(step, lambda: self.losses[-1], lambda: self.backend.lr_of(step))

    def on_train_epoch_end(self, run_context: RunContext) -> None:
        sink_epoch = run_context.original_args().cur_epoch_num
        if sink_epoch % self.sinks == 0:
            seconds = time.perf_counter() - self.start
            self.on_epoch_end(sink_epoch // self.sinks, float(np.mean(self.losses)), seconds)
            if self.backend.any_rank(self.on_epoch_end.stopping):
                run_context.request_stop()


def _scale(backend: Any) -> Any:
    if backend.amp:
        return DynamicLossScaleManager()
    if backend.options.loss_scale != 1:
        # drop_overflow_update: the train cell unscales the gradients itself and skips a
        # step that overflowed, so the optimizer sees true gradients.
        return FixedLossScaleManager(backend.options.loss_scale, drop_overflow_update=True)
    return None


def fit(backend: Any, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
    """Train epochs first..last of ``backend`` (a MindSporeBackend) with Model.train."""
    # backend.sink is off on the CPU: there MindSpore would silently feed step by step but
    # still count sink_size steps as an epoch.
    sink = backend.sink
    dataset, steps = backend.loader.train(plan, first)
    sinks = sinks_per_epoch(sink, backend.options.sink_size, steps)
    # In data parallel mode Model's train cell averages the gradients over the ranks.
    model = Model(
        # The network returns the loss (src/step.py's train_step): no loss_fn of Model's.
        backend.loss_cell(),
        None,
        backend.optimizer,
        loss_scale_manager=_scale(backend),
    )
    per = steps // sinks if sink else 1
    model.train(
        # Model.train's epochs are sinks; it runs from initial_epoch to this count.
        last * sinks,
        dataset,
        callbacks=[EpochCallback(on_epoch_end, sinks, backend, plan.steps_done(first - 1), per)],
        dataset_sink_mode=sink,
        sink_size=steps // sinks if sink else -1,
        initial_epoch=(first - 1) * sinks,
    )
