"""Inputs as a model takes them: (x - mean) / std per channel (images) or feature (rows)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


class Normalise:
    """Images scaled to [0, 1] first, mean and std (0-255) with them, as PyTorch and MindSpore
    examples do: the same bits, so ties (max pooling) break alike on every rank."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], ndim: int) -> None:
        self.scale = np.float32(255 if ndim == 3 else 1)
        shape = (-1,) + (1,) * (ndim - 1)  # (C, 1, 1) or (F,): broadcast over samples, batches
        self.mean = np.asarray(mean, np.float32).reshape(shape) / self.scale
        self.std = np.asarray(std, np.float32).reshape(shape) / self.scale

    def __call__(self, inputs: np.ndarray) -> np.ndarray:
        if not self.mean.size:  # integer ids (tokens): as they are
            return inputs
        # ((x / scale) - mean) / std in place on one float32 copy: no temporary per step.
        out = inputs.astype(np.float32)
        out /= self.scale
        out -= self.mean
        out /= self.std
        return out
