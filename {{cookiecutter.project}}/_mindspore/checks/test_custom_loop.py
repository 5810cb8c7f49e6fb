"""The custom loop's step: a step whose gradients are not finite never reaches the weights."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.amp import StaticLossScaler

from checks.yours import MODEL, TASK
from src.scaffold.backend.core import LossCell
from src.scaffold.backend.train_loop import TrainStep
from src.scaffold.task import DataShape


def test_a_step_whose_gradients_overflow_is_skipped() -> None:
    ms.set_device("CPU")
    rng = np.random.default_rng(0)
    inputs = ms.Tensor(rng.standard_normal((4, *MODEL.input_shape)).astype(np.float32))
    labels = ms.Tensor(np.arange(4, dtype=np.int32))
    # 1e38 times the loss overflows float32 in the gradients; 1 leaves them finite.
    for scale, changes in ((1e38, False), (1.0, True)):
        net = MODEL.build(DataShape(MODEL.input_shape, 4))
        optimizer = nn.Momentum(net.trainable_params(), 0.01, 0.9)
        weight = net.trainable_params()[-1]
        before = weight.asnumpy().copy()
        cell = LossCell(net, TASK.step.loss, TASK.step.train_step)
        TrainStep(net, cell, optimizer, StaticLossScaler(scale), 1)(inputs, labels)
        assert (not np.array_equal(weight.asnumpy(), before)) is changes, scale
