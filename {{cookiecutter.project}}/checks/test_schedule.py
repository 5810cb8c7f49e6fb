"""The learning-rate schedules: each step's value, warmup, and a cosine floor above lr refused."""

from __future__ import annotations

import math

import pytest

from src.scaffold.backend.schedule import Schedule
from src.scaffold.config import ScheduleOptions
from src.scaffold.errors import ConfigError


def schedule(name: str, warmup: float = 0.0, lr: float = 0.1, **extra: float) -> Schedule:
    options = {"name": name, "warmup_epochs": warmup, "step_epochs": 2, "gamma": 0.5, **extra}
    # 10 steps an epoch, 6 epochs.
    return Schedule.of(ScheduleOptions(**options), lr, 10, 60)


def test_constant_is_lr_at_every_step() -> None:
    plain = schedule("constant")
    assert plain.constant and set(plain.values()) == {0.1}


def test_step_multiplies_by_gamma_every_step_epochs() -> None:
    values = schedule("step").values()
    assert values[:20] == [0.1] * 20 and values[20:40] == [0.05] * 20
    assert values[40:] == [0.025] * 20


def test_cosine_ends_at_min_lr_after_a_linear_warmup() -> None:
    curve = schedule("cosine", warmup=0.5, min_lr=0.01)
    values = curve.values()
    assert not curve.constant
    assert values[:5] == pytest.approx([0.02, 0.04, 0.06, 0.08, 0.1])
    assert values[5] == 0.1 and values[-1] == pytest.approx(0.01)
    middle = 5 + (60 - 1 - 5) / 2
    assert curve.lr(int(middle)) == pytest.approx(
        0.01 + 0.09 * 0.5 * (1 + math.cos(math.pi * (int(middle) - 5) / 54))
    )
    assert all(a >= b for a, b in zip(values[5:], values[6:]))


def test_warmup_also_leads_into_constant_and_step() -> None:
    assert schedule("constant", warmup=1).values()[:10] == pytest.approx(
        [0.01 * (k + 1) for k in range(10)]
    )
    assert schedule("step", warmup=1).values()[10:20] == [0.1] * 10


def test_a_group_with_its_own_lr_is_scaled() -> None:
    curve = schedule("step")
    assert curve.scaled(0.1, 25) == curve.lr(25) == 0.05
    assert curve.scaled(0.2, 25) == pytest.approx(0.1)


def test_a_cosine_floor_at_or_above_lr_is_refused() -> None:
    with pytest.raises(ConfigError, match="schedule.min_lr 0.1 must be below lr 0.1"):
        schedule("cosine", min_lr=0.1)
