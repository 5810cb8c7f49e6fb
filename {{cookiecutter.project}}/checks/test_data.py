"""The built-in readers: ImageFolder and CSV as the finder hands them over, format
detection, augmentation, and bad data refused with one line naming the problem."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from src.scaffold.config import Config
from src.scaffold.data import finder, readers
from src.scaffold.errors import DatasetError


def png(path: Path, value: int, size=(6, 5), mode: str = "RGB") -> Path:
    """A small solid image: width x height = size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    colour = (value, value // 2, 255 - value) if mode == "RGB" else value
    Image.new(mode, size, colour).save(path)
    return path


def image_folder(root: Path, splits=("train", "test"), classes=("cat", "dog"), per=4) -> Path:
    for split in splits:
        base = root if split == "all" else root / split
        for label, name in enumerate(classes):
            for i in range(per):
                png(base / name / f"{i}.png", 40 * label + i)
    return root


DATA_KEYS = ("test_fraction", "resize", "label_column", "random_flip", "random_crop", "in_memory")


def table(path: Path, rows, header="a,b,label") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def splits(root: Path, readers_: dict | None = None, **options) -> finder.Splits:
    """finder.splits with these options; data.* ones by their key (test_fraction ...)."""
    fields = {f"data_{k}" if k in DATA_KEYS else k: v for k, v in options.items()}
    cfg = Config().with_options(**fields)
    return finder.splits(cfg.data, cfg.source(root), readers_ or readers.BUILTIN)


def test_image_folder_in_train_and_test(tmp_path: Path) -> None:
    result = splits(image_folder(tmp_path), val_fraction=0.25)
    assert result.info.format == "imagefolder" and result.info.shape == (3, 5, 6)
    assert result.info.classes == ("cat", "dog") and result.info.num_classes == 2
    assert len(result.train) == 6 and len(result.val) == 2 and len(result.test) == 8
    # Red channel: 0..3 for cats, 40..43 for dogs; the label follows the folder.
    assert result.test.arrays.shape == (8, 3, 5, 6)
    assert result.test.arrays[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 40, 41, 42, 43]
    assert result.test.labels.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


def test_a_val_folder_is_used_and_a_single_folder_is_split_by_ratio(tmp_path: Path) -> None:
    with_val = splits(image_folder(tmp_path / "a", splits=("train", "val", "test")))
    assert len(with_val.train) == 8 and len(with_val.val) == 8
    single = splits(image_folder(tmp_path / "b", splits=("all",), per=10), test_fraction=0.2)
    assert len(single.test) == 4 and len(single.train) + len(single.val) == 16


def test_grayscale_images_have_one_channel_and_resize_fits_mixed_sizes(tmp_path: Path) -> None:
    png(tmp_path / "train" / "a" / "0.png", 10, (8, 8), "L")
    png(tmp_path / "train" / "b" / "0.png", 20, (4, 6), "L")
    for name in ("a", "b"):
        png(tmp_path / "test" / name / "0.png", 30, (8, 8), "L")
    with pytest.raises(DatasetError, match=r"images of different sizes: .* set data.resize"):
        splits(tmp_path, val_fraction=0.5)
    result = splits(tmp_path, resize=(3, 4), val_fraction=0.5)
    assert result.info.shape == (1, 3, 4) and result.test.arrays.dtype == np.uint8


def test_csv_features_and_label_column(tmp_path: Path) -> None:
    rows = [f"{i},{i * 2},{'yes' if i % 2 else 'no'}" for i in range(10)]
    table(tmp_path / "train.csv", rows)
    table(tmp_path / "test.csv", rows[:4])
    result = splits(tmp_path, val_fraction=0.2)
    assert result.info.format == "csv" and result.info.shape == (2,)
    assert result.info.classes == ("no", "yes")
    assert result.test.arrays.dtype == np.float32 and result.test.labels.tolist() == [0, 1, 0, 1]
    # Normalisation statistics per feature, from the training split.
    assert len(result.info.mean) == 2 and len(result.info.std) == 2


def test_numeric_labels_sort_as_numbers(tmp_path: Path) -> None:
    table(tmp_path / "only.csv", [f"{i},0,{i % 11}" for i in range(40)], "a,b,y")
    result = splits(tmp_path, label_column="y")
    assert result.info.classes == tuple(str(i) for i in range(11))


def test_auto_detects_and_logs_why(tmp_path: Path, caplog) -> None:
    caplog.set_level("INFO")
    splits(image_folder(tmp_path / "wrapped" / "MyImages"), val_fraction=0.25)
    assert "data: imagefolder format in" in caplog.text
    assert "2 class folders of images in train/, test/" in caplog.text


def test_a_chosen_format_that_does_not_match_names_what_it_looked_for(tmp_path: Path) -> None:
    image_folder(tmp_path)
    with pytest.raises(
        DatasetError,
        match=r"no data in .* \(test, train\): looked for a CSV table \(train.csv and test.csv",
    ):
        splits(tmp_path, data_format="csv")


def test_unknown_shapes_list_every_format(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    with pytest.raises(DatasetError) as err:
        splits(tmp_path)
    message = str(err.value)
    assert "MNIST idx files" in message and "an image folder" in message and "CSV" in message
    assert "\n" not in message


BAD_IMAGES = {
    "an empty class folder": ("empty", "class folder .*dog is empty"),
    "a non-image file": ("text", r"notes.txt is not an image \(.png, .jpg, .jpeg\)"),
    "mixed sizes": ("sizes", "images of different sizes"),
    "different classes": (
        "classes",
        "train and test splits have different classes: test lacks dog",
    ),
}


@pytest.mark.parametrize("case", list(BAD_IMAGES))
def test_bad_image_folders_are_one_line_each(tmp_path: Path, case: str) -> None:
    kind, message = BAD_IMAGES[case]
    image_folder(tmp_path)
    dog = tmp_path / "train" / "dog"
    if kind == "empty":
        for path in dog.iterdir():
            path.unlink()
    elif kind == "text":
        (dog / "notes.txt").write_text("not a picture")
    elif kind == "sizes":
        png(dog / "9.png", 1, (7, 7))
    else:
        for path in (tmp_path / "test" / "dog").iterdir():
            path.unlink()
        (tmp_path / "test" / "dog").rmdir()
    with pytest.raises(DatasetError, match=message) as err:
        splits(tmp_path)
    assert "\n" not in str(err.value)


BAD_TABLES = {
    "no label column": ("a,b,c", ["1,2,3"], "has no label column 'label'.*its columns: a, b, c"),
    "a non-numeric feature": ("a,b,label", ["1,2,0", "1,x,1"], r"line 3, column 'b': 'x' is not"),
    "a ragged row": ("a,b,label", ["1,2,0", "1,2"], "line 3 has 2 fields, the header has 3"),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_bad_tables_are_one_line_each(tmp_path: Path, case: str) -> None:
    header, rows, message = BAD_TABLES[case]
    table(tmp_path / "train.csv", rows, header)
    table(tmp_path / "test.csv", rows, header)
    with pytest.raises(DatasetError, match=message):
        splits(tmp_path)


def test_test_labels_the_training_split_lacks_are_refused(tmp_path: Path) -> None:
    table(tmp_path / "train.csv", ["1,2,a", "3,4,a", "5,6,a"])
    table(tmp_path / "test.csv", ["1,2,b"])
    with pytest.raises(DatasetError, match="train and test splits have different classes"):
        splits(tmp_path)


def test_streaming_is_chosen_for_augmentation_and_by_setting(tmp_path: Path) -> None:
    image_folder(tmp_path)
    assert splits(tmp_path, val_fraction=0.25).info.in_memory
    streamed = splits(tmp_path, val_fraction=0.25, random_flip=True)
    assert not streamed.info.in_memory and not streamed.train.in_memory
    assert streamed.train.load(0).shape == (3, 5, 6)
    assert not splits(tmp_path, val_fraction=0.25, in_memory="false").info.in_memory


def test_given_statistics_win_and_must_match_the_channels(tmp_path: Path) -> None:
    image_folder(tmp_path)
    given = splits(tmp_path, val_fraction=0.25, data_mean=(1.0, 2.0, 3.0), data_std=(4.0,) * 3)
    assert given.info.mean == (1.0, 2.0, 3.0)
    with pytest.raises(DatasetError, match="data.mean has 2 values; the data has 3"):
        splits(tmp_path, val_fraction=0.25, data_mean=(1.0, 2.0), data_std=(1.0, 1.0))


def test_augment_crops_and_flips_within_the_image() -> None:
    image = np.arange(2 * 4 * 5, dtype=np.uint8).reshape(2, 4, 5)
    rng = np.random.default_rng(0)
    outs = [readers.augment(image, rng, crop=2, flip=True) for _ in range(20)]
    assert all(out.shape == image.shape and out.dtype == np.uint8 for out in outs)
    assert any(not np.array_equal(out, image) for out in outs)
    assert np.array_equal(readers.augment(image, rng, crop=0, flip=False), image)


def test_a_reader_of_your_own_is_one_class(tmp_path: Path) -> None:
    @readers.reader("npy")
    class NpyReader(readers.Reader):
        looks_for = "inputs.npy and labels.npy"

        def found(self, directory: Path):
            return "inputs.npy" if (directory / "inputs.npy").is_file() else None

        def read(self, directory: Path):
            from src.scaffold.data.splits import array_split

            inputs = np.load(directory / "inputs.npy")
            return {"all": array_split(inputs, np.load(directory / "labels.npy"))}

    np.save(tmp_path / "inputs.npy", np.ones((20, 3), dtype=np.float32))
    np.save(tmp_path / "labels.npy", np.arange(20) % 2)
    result = splits(tmp_path, {**readers.BUILTIN, "npy": NpyReader}, data_format="npy")
    assert result.info.format == "npy" and result.info.shape == (3,)
    assert len(result.test) == 4


def test_images_decode_to_pillows_pixels_whatever_their_suffix_says(tmp_path: Path) -> None:
    from src.scaffold.data.images import ImageDecoder

    noise = np.random.default_rng(0).integers(0, 256, (5, 6, 3), dtype=np.uint8)
    saved = {
        "rgb.png": ("PNG", "RGB"),
        "grey.png": ("PNG", "L"),
        "palette.png": ("PNG", "P"),
        "photo.jpg": ("JPEG", "RGB"),
        "jpeg-named.png": ("JPEG", "RGB"),
        "png-named.jpeg": ("PNG", "RGB"),
    }
    for name, (fmt, mode) in saved.items():
        Image.fromarray(noise).convert(mode).save(tmp_path / name, format=fmt)
        for wanted, size in (("RGB", None), ("L", None), ("RGB", (3, 4))):
            with Image.open(tmp_path / name) as image:
                expected = image.convert(wanted)
                if size is not None:
                    expected = expected.resize(size, Image.BILINEAR)
                pixels = np.asarray(expected)
            got = ImageDecoder(wanted, size)(tmp_path / name)
            assert got.shape == (len(wanted), pixels.shape[0], pixels.shape[1])
            assert (got == (pixels[None] if wanted == "L" else pixels.transpose(2, 0, 1))).all()
