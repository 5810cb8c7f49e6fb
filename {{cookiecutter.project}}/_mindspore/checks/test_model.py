"""The MindSpore parts: the models build for the data's shape and take any batch size;
evaluation batches; sink arithmetic."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest

from src.model import LeNet5
from src.scaffold.backend import HEAD, model_spec
from src.scaffold.config_ext import sink_on
from src.scaffold.errors import ConfigError
from src.scaffold.loader import sinks_per_epoch
from src.scaffold.registry import MODELS, DataShape
from src.step import evaluate


@pytest.fixture(autouse=True)
def cpu() -> None:
    ms.set_device("CPU")


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("lenet", (1, 28, 28)),
        ("lenet", (3, 32, 32)),
        ("resnet", (1, 28, 28)),
        ("resnet", (3, 32, 32)),
        ("mlp", (1, 28, 28)),
        ("mlp", (3, 32, 32)),
        ("mlp", (64,)),
    ],
)
def test_each_model_builds_for_the_data_shape(name: str, shape: tuple[int, ...]) -> None:
    net = MODELS[name].build(DataShape(shape, 12))
    for batch in (1, 5):
        inputs = np.zeros((batch, *shape), np.float32)
        assert net(ms.Tensor(inputs)).shape == (batch, 12)
    # The head is the layer --skip_layers names when the class count changes.
    assert any(p.name.startswith(MODELS[name].head + ".") for p in net.trainable_params())


def test_image_models_refuse_rows_with_a_clear_message() -> None:
    for name in ("lenet", "resnet"):
        with pytest.raises(ValueError, match=rf"model {name} takes images .* use mlp"):
            MODELS[name].build(DataShape((64,), 10))
    with pytest.raises(ValueError, match="at least 12x12, not 8x8"):
        MODELS["lenet"].build(DataShape((1, 8, 8), 10))


def test_an_unknown_model_names_those_there() -> None:
    with pytest.raises(ConfigError, match="unknown model 'nope'; src/model.py has lenet, mlp"):
        model_spec("nope")
    # The default model's head keeps the name earlier checkpoints have.
    assert HEAD == "fc3"


def test_evaluate_takes_a_last_partial_batch() -> None:
    net = LeNet5()
    rng = np.random.default_rng(0)
    # 1001 samples: a full batch of 1000 and a last one of 1.
    images = rng.standard_normal((1001, 1, 28, 28)).astype(np.float32)
    labels = np.zeros(1001, np.int32)
    metrics = evaluate(net, [(images[:1000], labels[:1000]), (images[1000:], labels[1000:])])
    assert 0 <= metrics["accuracy"] <= 1 and metrics["loss"] > 0
    whole = evaluate(net, [(images, labels)])
    assert whole["accuracy"] == metrics["accuracy"]
    assert whole["loss"] == pytest.approx(metrics["loss"], rel=1e-5)


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
