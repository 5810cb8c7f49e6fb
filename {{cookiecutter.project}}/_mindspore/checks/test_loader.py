"""The data pipelines: streamed samples follow the BatchPlan (N ranks together read the
batches of one), augmentation does not depend on the workers, evaluation streams in order,
and normalisation is per channel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from checks.test_batches import SHAPE, split_of
from src.scaffold.backend.api import BatchPlan
from src.scaffold.backend.loader import Loader
from src.scaffold.backend.options import MSConfig
from src.scaffold.data.normalise import Normalise
from src.scaffold.data.readers import augment
from src.scaffold.data.splits import DataInfo, Split, Splits


def streamed(tmp_path: Path, count: int) -> Split:
    """Sample i is a file holding an image filled with i: what a batch holds is readable."""
    return split_of(tmp_path, count)


def loader(split: Split, world_size: int, **options: object) -> Loader:
    # Mean 0 and std 1: a normalised sample still reads as its index.
    info = DataInfo("test", SHAPE, 10, (), (0.0,), (1.0,), in_memory=False)
    options = {f"data_{key}" if key != "batch_size" else key: v for key, v in options.items()}
    cfg = replace(MSConfig(), **{"data_num_workers": 2, "batch_size": 8, **options})
    return Loader(Splits(split, split, split, info), cfg, world_size, augment)


def ids(inputs: np.ndarray) -> np.ndarray:
    # Normalised in float32: i comes back to within rounding.
    return np.rint(inputs[:, 0, 0, 0]).astype(int)


def epochs_read(data: Loader, plan: BatchPlan, epochs: int) -> list[list[np.ndarray]]:
    """Per epoch, per step: the indices of the samples in the batch."""
    dataset, steps = data.train(plan, 1)
    assert dataset.get_dataset_size() == steps == plan.steps_per_epoch
    batches = dataset.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    return [[ids(inputs) for inputs, _ in batches] for _ in range(epochs)]


def test_two_ranks_stream_disjoint_halves_of_the_one_rank_batches(tmp_path: Path) -> None:
    split = streamed(tmp_path, 100)
    one = epochs_read(loader(split, 1), BatchPlan(100, 16, 1, 0, seed=3), 2)
    ranks = [epochs_read(loader(split, 2), BatchPlan(100, 8, 2, r, seed=3), 2) for r in (0, 1)]
    for epoch in range(2):
        assert len(one[epoch]) == 6  # 100 // 16: the last partial global batch is dropped
        plan = BatchPlan(100, 16, 1, 0, seed=3)
        np.testing.assert_array_equal(np.stack(one[epoch]), plan.batches(epoch + 1))
        for step, batch in enumerate(one[epoch]):
            first, second = ranks[0][epoch][step], ranks[1][epoch][step]
            assert not set(first) & set(second)
            np.testing.assert_array_equal(np.concatenate([first, second]), batch)
    assert not np.array_equal(np.stack(one[0]), np.stack(one[1]))  # a new order each epoch


def test_augmentation_is_the_same_whatever_the_workers(tmp_path: Path) -> None:
    split = streamed(tmp_path, 40)
    plan = BatchPlan(40, 8, 1, 0, seed=0)
    read = []
    for workers in (0, 2):
        data = loader(split, 1, num_workers=workers, random_crop=2, random_flip=True)
        dataset, _ = data.train(plan, 1)
        batches = dataset.create_tuple_iterator(num_epochs=1, output_numpy=True)
        read.append([inputs for inputs, _ in batches])
    for in_process, by_workers in zip(*read):
        np.testing.assert_array_equal(in_process, by_workers)
    # A crop of 2 pixels on a 4x4 image leaves zero padding in some samples.
    assert any((batch == 0).any() for batch in read[0])


def test_streamed_evaluation_reads_every_sample_in_order(tmp_path: Path) -> None:
    data = loader(streamed(tmp_path, 21), 1)
    batches = list(data.batches("val"))
    assert [len(labels) for _, labels in batches] == [8, 8, 5]
    inputs = np.concatenate([inputs for inputs, _ in batches])
    np.testing.assert_array_equal(ids(inputs), np.arange(21))
    labels = np.concatenate([labels for _, labels in batches])
    np.testing.assert_array_equal(labels, np.arange(21) % 10)


@pytest.mark.parametrize(
    ("shape", "mean", "std"),
    [((3, 2, 2), (10.0, 20.0, 30.0), (1.0, 2.0, 5.0)), ((3,), (1.0, 2.0, 3.0), (2.0, 2.0, 2.0))],
)
def test_normalisation_is_per_channel_or_feature(
    shape: tuple[int, ...], mean: tuple[float, ...], std: tuple[float, ...]
) -> None:
    batch = np.full((2, *shape), 40, np.uint8 if len(shape) == 3 else np.float32)
    out = Normalise(mean, std, len(shape))(batch)
    assert out.dtype == np.float32
    for c in range(3):
        np.testing.assert_allclose(out[:, c], (40 - mean[c]) / std[c], rtol=1e-6)
