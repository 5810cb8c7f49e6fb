"""The PyTorch parts: every model of src/model.py builds for its declared input and takes
any batch size; mixed precision by device and setting."""

from __future__ import annotations

import pytest
import torch

from checks.yours import TASK
from src.scaffold.backend.precision import choose
from src.scaffold.errors import ConfigError
from src.scaffold.task import DataShape


@pytest.mark.parametrize("name", sorted(TASK.models))
def test_each_model_takes_any_batch_size_and_class_count(name: str) -> None:
    spec = TASK.models[name]
    for classes in (10, 12):
        net = spec.build(DataShape(spec.input_shape, classes))
        for batch in (1, 7, 64):
            if spec.ids:  # ids (tokens) in, a score for each class at each position out
                ids = torch.zeros(batch, *spec.input_shape, dtype=torch.int64)
                assert net(ids).shape == (batch, *spec.input_shape, classes)
            else:
                assert net(torch.zeros(batch, *spec.input_shape)).shape == (batch, classes)
        if spec.head:
            # The head is the layer --skip_layers names when the class count changes.
            assert any(key.startswith(spec.head + ".") for key in net.state_dict())


def test_an_unknown_model_names_those_there() -> None:
    with pytest.raises(
        ConfigError, match=f"unknown model 'nope'; src/model.py has {', '.join(TASK.models)}"
    ):
        TASK.model("nope")


def test_amp_is_off_on_the_cpu_unless_asked_for() -> None:
    cpu = torch.device("cpu")
    assert choose("auto", cpu).dtype is None and choose("false", cpu).dtype is None
    forced = choose("true", cpu)
    assert forced.dtype == torch.bfloat16 and forced.scaler() is None
    with forced.autocast():
        assert torch.nn.Linear(4, 2)(torch.zeros(1, 4)).dtype == torch.bfloat16
