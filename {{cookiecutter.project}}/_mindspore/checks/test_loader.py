"""The data pipelines: streamed samples follow the BatchPlan (N ranks together read the
batches of one), augmentation does not depend on the workers, evaluation streams in order,
and normalisation is per channel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from checks.test_batches import SHAPE, split_of
from src.scaffold.backend.loader import Loader
from src.scaffold.config import DataOptions
from src.scaffold.data.images import ImageFolderReader
from src.scaffold.data.normalise import Normalise
from src.scaffold.data.readers import augment
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import DataInfo, Split, Splits, hold_out


def streamed(tmp_path: Path, count: int) -> Split:
    """Sample i is a file holding an image filled with i: what a batch holds is readable."""
    return split_of(tmp_path, count)


def loader(
    split: Split, world_size: int, info: DataInfo | None = None, **options: object
) -> Loader:
    # Mean 0 and std 1: a normalised sample still reads as its index.
    info = info or DataInfo("test", SHAPE, 10, (), (0.0,), (1.0,), in_memory=False)
    batch_size = int(options.pop("batch_size", 8))  # type: ignore[call-overload]
    data = replace(DataOptions(), **{"num_workers": 2, **options})
    return Loader(Splits(split, split, split, info), data, batch_size, world_size, augment)


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


def png_folder(root: Path, mode: str, count: int, fmt: str = "PNG") -> Split:
    """Three class folders of ``count`` noise images each, read as train.py reads them."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("b", "a", "c"):
        (root / name).mkdir(parents=True)
        for i in range(count):
            noise = Image.fromarray(rng.integers(0, 256, (5, 4, 3), dtype=np.uint8))
            noise.convert(mode).save(root / name / f"{i}.png", format=fmt)
    return ImageFolderReader({}).read(root)["all"]


def folder_loader(split: Split, world_size: int, **options: object) -> Loader:
    channels = split.shape[0]
    info = DataInfo("imagefolder", split.shape, 3, (), (100.0,) * channels, (50.0,) * channels)
    return loader(split, world_size, info, **options)


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_pngs_are_read_by_imagefolderdataset_as_pillow_reads_them_in_the_plans_order(
    tmp_path: Path, mode: str
) -> None:
    # The validation hold-out leaves the folder's files with gaps: positions, not ranges.
    train, _ = hold_out(png_folder(tmp_path, mode, 13), 0.2, seed=1)
    for world_size in (1, 2):
        for rank in range(world_size):
            data = folder_loader(train, world_size)
            assert data.folder is not None
            plan = BatchPlan(len(train), 4, world_size, rank, seed=5)
            dataset, steps = data.train(plan, 2)  # from epoch 2, as a resumed run
            assert dataset.get_dataset_size() == steps == plan.steps_per_epoch
            batches = dataset.create_tuple_iterator(num_epochs=2, output_numpy=True)
            for epoch in (2, 3):
                read = [(inputs, labels) for inputs, labels in batches]
                assert len(read) == steps
                for (inputs, labels), indices in zip(read, plan.batches(epoch)):
                    # The same pixels as Pillow's, normalised the same way: equal to the bit.
                    pillow = data.normalise(np.stack([train.load(int(i)) for i in indices]))
                    assert inputs.dtype == np.float32 and labels.dtype == np.int32
                    np.testing.assert_array_equal(inputs, pillow)
                    np.testing.assert_array_equal(labels, train.labels[indices])


def test_a_last_epoch_cut_short_by_max_steps_ends_early(tmp_path: Path) -> None:
    train = png_folder(tmp_path, "RGB", 8)
    data = folder_loader(train, 1)
    plan = BatchPlan(len(train), 4, 1, 0, seed=0, max_steps=8)  # 6 steps an epoch
    dataset, steps = data.train(plan, 1)
    batches = dataset.create_tuple_iterator(num_epochs=2, output_numpy=True)
    assert [len([b for b in batches]) for _ in range(2)] == [steps, 2] == [6, 2]


def test_pngs_to_convert_or_augment_go_through_the_loader_processes(tmp_path: Path) -> None:
    assert folder_loader(png_folder(tmp_path / "palette", "P", 2), 1).folder is None
    assert folder_loader(png_folder(tmp_path / "jpeg", "RGB", 2, "JPEG"), 1).folder is None
    rgb = png_folder(tmp_path / "rgb", "RGB", 2)
    assert folder_loader(rgb, 1, random_flip=True).folder is None
    resized = ImageFolderReader({"resize": [5, 4]}).read(tmp_path / "rgb")["all"]
    assert folder_loader(resized, 1).folder is None  # Pillow resizes: its pixels, not ours
    assert folder_loader(rgb, 1).folder is not None
    (tmp_path / "rgb" / "a" / ".hidden.png").write_bytes(b"")  # ImageFolderDataset sees it
    assert folder_loader(rgb, 1).folder is None


def test_a_png_its_decoder_rejects_is_named(tmp_path: Path) -> None:
    train = png_folder(tmp_path, "RGB", 4)
    broken = tmp_path / "b" / "2.png"
    broken.write_bytes(broken.read_bytes()[:60])
    data = folder_loader(train, 1)
    dataset, _ = data.train(BatchPlan(len(train), 4, 1, 0, seed=0), 1)
    with pytest.raises(RuntimeError) as raised:
        for _ in dataset.create_tuple_iterator(num_epochs=1):
            pass
    said = data.broken_image(raised.value)
    assert said is not None and str(said).startswith(f"{broken} cannot be read as an image: ")
    assert data.broken_image(RuntimeError("another")) is None
