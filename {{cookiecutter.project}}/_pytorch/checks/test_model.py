"""The PyTorch parts: LeNet takes any batch size; mixed precision by device and setting."""

from __future__ import annotations

import torch

from src.model import LeNet
from src.scaffold.precision import choose


def test_model_takes_any_batch_size_and_class_count() -> None:
    for classes in (10, 12):
        net = LeNet(classes)
        for batch in (1, 7, 64):
            assert net(torch.zeros(batch, 1, 28, 28)).shape == (batch, classes)


def test_amp_is_off_on_the_cpu_unless_asked_for() -> None:
    cpu = torch.device("cpu")
    assert choose("auto", cpu).dtype is None and choose("false", cpu).dtype is None
    forced = choose("true", cpu)
    assert forced.dtype == torch.bfloat16 and forced.scaler() is None
    with forced.autocast():
        assert torch.nn.Linear(4, 2)(torch.zeros(1, 4)).dtype == torch.bfloat16
