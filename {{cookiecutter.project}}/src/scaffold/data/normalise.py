"""Inputs as a model takes them: (x - mean) / std per channel (images) or feature (rows)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


class Normalise:
    """(x - mean) / std per channel (images) or per feature (rows), as float32, with numpy.

    Images are scaled to [0, 1] first, and mean and std with them (they come in 0-255
    units), as PyTorch and MindSpore examples normalise: the same values to the last
    bit. That matters more than it seems: ties between equal pixels (max pooling) break
    by rounding, and N ranks end with one process's weights only if they round alike.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], ndim: int) -> None:
        self.scale = np.float32(255 if ndim == 3 else 1)
        # One value per channel or feature, shaped to broadcast over one sample (C, H, W)
        # or (F,), and over a batch of them.
        trailing = (1,) * (ndim - 1)
        mean_ = np.asarray(mean, np.float32).reshape(-1, *trailing)
        std_ = np.asarray(std, np.float32).reshape(-1, *trailing)
        self.mean, self.std = mean_ / self.scale, std_ / self.scale

    def __call__(self, inputs: np.ndarray) -> np.ndarray:
        # In place on one float32 copy: the same operations in the same order as
        # ((x / scale) - mean) / std, without a temporary array per step.
        out = inputs.astype(np.float32)
        out /= self.scale
        out -= self.mean
        out /= self.std
        return out
