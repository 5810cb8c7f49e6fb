"""The training loop: Model.train with data sink (its epochs are sinks: sinks_per_epoch make ours)
and a callback; loss scaling dynamic with amp (skipping steps that overflow), else loss_scale."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from mindspore import Model
from mindspore.train import Callback, DynamicLossScaleManager, FixedLossScaleManager, RunContext

from src.scaffold.backend.api import EpochEnd
from src.scaffold.backend.loader import sinks_per_epoch
from src.scaffold.data.sharding import BatchPlan

LOOP = "model"


class EpochCallback(Callback):
    """Reports each step's loss to on_epoch_end.step and each epoch of ours to on_epoch_end."""

    def __init__(
        self, on_epoch_end: EpochEnd, sinks: int, backend: Any, done: int, per_call: int
    ) -> None:
        super().__init__()
        self.on_epoch_end, self.sinks, self.backend = on_epoch_end, sinks, backend
        self.losses: list[float] = []
        self.start = time.perf_counter()
        # Steps before this start, and per callback: 1, or a whole sink's with data sink.
        self.step, self.per_call = done, per_call

    def on_train_epoch_begin(self, run_context: RunContext) -> None:
        if (run_context.original_args().cur_epoch_num - 1) % self.sinks == 0:
            self.losses, self.start = [], time.perf_counter()

    def on_train_step_end(self, run_context: RunContext) -> None:
        # Once per sink with data sink (its last step's loss); (loss, overflow, scale) if scaled.
        outputs = run_context.original_args().net_outputs
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
        # drop_overflow_update: the train cell unscales and skips steps that overflowed.
        return FixedLossScaleManager(backend.options.loss_scale, drop_overflow_update=True)
    return None


def fit(backend: Any, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
    """Train epochs first..last of ``backend`` (a MindSporeBackend) with Model.train."""
    # Off on the CPU, where MindSpore would feed step by step yet count sink_size steps an epoch.
    sink = backend.sink
    dataset, steps = backend.loader.train(plan, first)
    sinks = sinks_per_epoch(sink, backend.options.sink_size, steps)
    # The net returns the loss: no loss_fn. Data parallel, Model averages the gradients.
    model = Model(backend.loss_cell(), None, backend.optimizer, loss_scale_manager=_scale(backend))
    per = steps // sinks if sink else 1
    model.train(
        # Model.train's epochs are sinks; it runs from initial_epoch to this count.
        last * sinks,
        dataset,
        callbacks=[EpochCallback(on_epoch_end, sinks, backend, plan.steps_done(first - 1), per)],
        dataset_sink_mode=sink,
        sink_size=per if sink else -1,
        initial_epoch=(first - 1) * sinks,
    )
