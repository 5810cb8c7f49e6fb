"""The custom loop's step: a step whose gradients are not finite never reaches the weights."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.amp import StaticLossScaler

from src.model import LeNet5
from src.scaffold.train_loop import TrainStep


def test_a_step_whose_gradients_overflow_is_skipped() -> None:
    ms.set_device("CPU")
    rng = np.random.default_rng(0)
    images = ms.Tensor(rng.standard_normal((4, 1, 28, 28)).astype(np.float32))
    labels = ms.Tensor(np.arange(4, dtype=np.int32))
    # 1e38 times the loss overflows float32 in the gradients; 1 leaves them finite.
    for scale, changes in ((1e38, False), (1.0, True)):
        net = LeNet5()
        optimizer = nn.Momentum(net.trainable_params(), 0.01, 0.9)
        before = net.fc3.weight.asnumpy().copy()
        TrainStep(net, optimizer, StaticLossScaler(scale), 1)(images, labels)
        assert (not np.array_equal(net.fc3.weight.asnumpy(), before)) is changes, scale
