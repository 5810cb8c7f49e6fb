"""The MindSpore parts: LeNet-5 takes any batch size; evaluation batches; sink arithmetic."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest

from src.config_ext import sink_on
from src.dataset import sinks_per_epoch
from src.errors import ConfigError
from src.model import LeNet5, evaluate


def test_model_takes_any_batch_size() -> None:
    ms.set_device("CPU")
    net = LeNet5()
    for batch in (1, 7, 64):
        images = np.zeros((batch, 1, 28, 28), np.float32)
        assert net(ms.Tensor(images)).shape == (batch, 10)
    # 1001 samples: a full evaluation batch of 1000 and a last one of 1.
    images = np.random.default_rng(0).standard_normal((1001, 1, 28, 28)).astype(np.float32)
    metrics = evaluate(net, images, np.zeros(1001, np.int32))
    assert 0 <= metrics["accuracy"] <= 1 and metrics["loss"] > 0


@pytest.mark.parametrize(
    ("sink", "sink_size", "steps", "sinks"),
    [(False, 5, 20, 1), (True, -1, 20, 1), (True, 5, 20, 4), (True, 20, 20, 1), (True, 50, 20, 1)],
)
def test_sinks_per_epoch(sink: bool, sink_size: int, steps: int, sinks: int) -> None:
    # Model.train counts a sink as an epoch: our epoch is `sinks` of its epochs.
    assert sinks_per_epoch(sink, sink_size, steps) == sinks


def test_a_sink_size_must_divide_the_epoch() -> None:
    with pytest.raises(ConfigError, match="sink_size 6 must divide the 20 steps"):
        sinks_per_epoch(True, 6, 20)


@pytest.mark.parametrize(
    ("setting", "target", "on"),
    [
        ("auto", "Ascend", True),
        ("auto", "GPU", False),
        ("auto", "CPU", False),
        ("true", "GPU", True),
        ("true", "CPU", False),
        ("false", "Ascend", False),
    ],
)
def test_sink_mode_is_on_by_default_for_ascend_only(setting: str, target: str, on: bool) -> None:
    assert sink_on(setting, target) is on
