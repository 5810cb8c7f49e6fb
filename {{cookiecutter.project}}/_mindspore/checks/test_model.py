"""The MindSpore parts: every model of src/model.py builds for its declared input and takes
any batch size; evaluation batches; sink arithmetic."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest

from checks.yours import MODEL, TASK
from src.scaffold.backend.core import MindSporeBackend
from src.scaffold.backend.loader import sinks_per_epoch
from src.scaffold.backend.options import sink_on
from src.scaffold.errors import ConfigError
from src.scaffold.task import DataShape


@pytest.fixture(autouse=True)
def cpu() -> None:
    ms.set_device("CPU")


@pytest.mark.parametrize("name", sorted(TASK.models))
def test_each_model_takes_any_batch_size_and_class_count(name: str) -> None:
    spec = TASK.models[name]
    net = spec.build(DataShape(spec.input_shape, 12))
    for batch in (1, 5):
        if spec.ids:  # ids (tokens) in, a score for each class at each position out
            ids = np.zeros((batch, *spec.input_shape), np.int64)
            assert net(ms.Tensor(ids)).shape == (batch, *spec.input_shape, 12)
        else:
            inputs = np.zeros((batch, *spec.input_shape), np.float32)
            assert net(ms.Tensor(inputs)).shape == (batch, 12)
    if spec.head:
        # The head is the layer --skip_layers names when the class count changes.
        assert any(p.name.startswith(spec.head + ".") for p in net.trainable_params())


def test_an_unknown_model_names_those_there() -> None:
    with pytest.raises(
        ConfigError, match=f"unknown model 'nope'; src/model.py has {', '.join(TASK.models)}"
    ):
        TASK.model("nope")


class Batches:
    """A loader stand-in: the given batches of every split."""

    def __init__(self, batches: list) -> None:
        self.given = batches

    def batches(self, split: str) -> list:
        return self.given


def evaluate(net: ms.nn.Cell, batches: list) -> dict[str, float]:
    backend = MindSporeBackend.__new__(MindSporeBackend)
    backend.net, backend.step, backend.loader = net, TASK.step, Batches(batches)
    return backend.evaluate("val")


def test_evaluate_takes_a_last_partial_batch() -> None:
    net = MODEL.build(DataShape(MODEL.input_shape, 10))
    rng = np.random.default_rng(0)
    # A full batch and a last one of 1: 1000 samples, or 32 sequences of ids (tokens), evaluated
    # a training batch at a time, below the classes, with a label at each position.
    full = 32 if MODEL.ids else 1000
    if MODEL.ids:
        inputs = rng.integers(0, 10, (full + 1, *MODEL.input_shape))
        labels = np.zeros((full + 1, *MODEL.input_shape), np.int32)
    else:
        inputs = rng.standard_normal((full + 1, *MODEL.input_shape)).astype(np.float32)
        labels = np.zeros(full + 1, np.int32)
    metrics = evaluate(net, [(inputs[:full], labels[:full]), (inputs[full:], labels[full:])])
    whole = evaluate(net, [(inputs, labels)])
    assert metrics.keys() == whole.keys() and TASK.monitor.metric in whole
    for name, value in whole.items():
        # One batch against a full one and 1: float32 sums in another order, ~1e-7 relative.
        assert value == pytest.approx(metrics[name], rel=1e-5), name


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
