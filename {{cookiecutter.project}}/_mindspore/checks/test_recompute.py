"""shard.activation_checkpointing on MindSpore: the blocks a model names recompute their
activations (Cell.recompute()) and train the same steps; a model that names none is a WARNING,
a name that is no list of cells one line."""

from __future__ import annotations

import logging

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from checks.yours import MODEL
from src.scaffold.backend import recompute
from src.scaffold.errors import ConfigError
from src.scaffold.task import DataShape, ModelSpec

WIDTH, CLASSES = 16, 4


class Stack(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.CellList(
            [nn.SequentialCell(nn.Dense(WIDTH, WIDTH), nn.Tanh()) for _ in range(3)]
        )
        self.head = nn.Dense(WIDTH, CLASSES)

    def construct(self, inputs: ms.Tensor) -> ms.Tensor:
        for block in self.blocks:
            inputs = block(inputs)
        return self.head(inputs)


def _spec(blocks: str) -> ModelSpec:
    return ModelSpec("stack", lambda shape: Stack(), (WIDTH,), "head", __file__, False, blocks)


def _losses(on: bool) -> list[float]:
    ms.set_seed(1)
    net = Stack()
    recompute.apply(net, _spec("blocks"), on)
    optimizer = nn.Adam(net.trainable_params(), 1e-2)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), optimizer)
    rng = np.random.default_rng(0)
    found = []
    for _ in range(4):
        inputs = ms.Tensor(rng.standard_normal((8, WIDTH)).astype(np.float32))
        labels = ms.Tensor(rng.integers(0, CLASSES, 8).astype(np.int32))
        found.append(float(step(inputs, labels).asnumpy()))
    return found


def test_recomputed_blocks_train_the_same_steps() -> None:
    """The same operations on the same values, recomputed: bit for bit the same losses."""
    ms.set_device("CPU")
    assert _losses(True) == _losses(False)


def test_no_blocks_is_a_warning_and_a_wrong_name_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        recompute.apply(Stack(), _spec(""), True)
    assert "names no blocks to recompute, so nothing is" in caplog.text
    with pytest.raises(ConfigError, match="names no list of cells of it"):
        recompute.apply(Stack(), _spec("head"), True)


def test_this_projects_model_names_its_blocks_rightly() -> None:
    net = MODEL.build(DataShape(MODEL.input_shape, 10))
    # gpt names its blocks, resnet its stages; lenet and mlp none (small).
    assert bool(recompute.blocks_of(net, MODEL)) == (MODEL.name in ("gpt", "resnet"))
