"""The bare loops' MindSpore step (bare_loop.py, bare_start.py): TrainOneStepCell over the
project's own LeNet5, its own loss (src/step.py's ``loss``, ops.cross_entropy as generated)
and nn.Momentum, nothing else.

The project's loss, not another: the loss is compiled into the step, and its choice alone
moves the first step's time. nn.SoftmaxCrossEntropyWithLogits(sparse=True), which these
loops used before, compiles 0.3 s faster than ops.cross_entropy on 2 CPU cores (0.43 s
against 0.73 s to the first step's end), while train.py trains on the digits at 534 to 614
samples/s with it against 766 to 783 with ops.cross_entropy: the project's choice, and
the bare start measured against another loss charged it to the scaffold.
"""

from __future__ import annotations

from typing import Any


def train_step(classes: int, lr: float, momentum: float) -> Any:
    """A TrainOneStepCell in training mode; import the project (sys.path) and seed first."""
    from mindspore import nn
    from src.model import LeNet5
    from src.step import loss

    class WithLoss(nn.Cell):
        def __init__(self, net: nn.Cell) -> None:
            super().__init__()
            self.net = net

        def construct(self, images: Any, labels: Any) -> Any:
            return loss(self.net(images), labels)

    net = LeNet5(classes)
    step = nn.TrainOneStepCell(WithLoss(net), nn.Momentum(net.trainable_params(), lr, momentum))
    step.set_train()
    return step
