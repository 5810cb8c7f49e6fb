"""Finding and reading MNIST idx files: every layout, archives, one dataset among several,
bad files (src/scaffold/data/finder.py, src/scaffold/data/idx.py)."""

from __future__ import annotations

import gzip
import logging
import shutil
import struct
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from src.scaffold.config import DataOptions, Source
from src.scaffold.data import finder
from src.scaffold.data.finder import select
from src.scaffold.data.idx import FILES, read_idx
from src.scaffold.data.readers import BUILTIN
from src.scaffold.data.splits import array_split, hold_out, synthetic
from src.scaffold.data.tokens import ByteTokenizer
from src.scaffold.errors import DatasetError, StorageError

# Where each split's two files go, per layout; OpenI's PyTorch sample is "openi-raw".
LAYOUTS = {
    "flat": {"train": "", "test": ""},
    "split": {"train": "train", "test": "test"},
    "torchvision": {"train": "MNIST/raw", "test": "MNIST/raw"},
    "openi-raw": {"train": "train/MNIST/raw", "test": "test/MNIST/raw"},
    "wrapped": {"train": "MnistDataset/train", "test": "MnistDataset/test"},
}


def idx(array: np.ndarray) -> bytes:
    header = struct.pack(f">BBBB{array.ndim}I", 0, 0, 0x08, array.ndim, *array.shape)
    return header + array.astype(np.uint8).tobytes()


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path, data = path.with_name(path.name + ".gz"), gzip.compress(data)
    path.write_bytes(data)
    return path


def write_dataset(root: Path, layout: str, gz: bool = False) -> dict[str, tuple]:
    """5 train and 3 test samples in a layout; returns the arrays."""
    rng = np.random.default_rng(0)
    arrays = {}
    for split, count in (("train", 5), ("test", 3)):
        images = rng.integers(0, 256, size=(count, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=count, dtype=np.uint8)
        folder = root / LAYOUTS[layout][split]
        write(folder / FILES[split][0], idx(images), gz)
        write(folder / FILES[split][1], idx(labels), gz)
        arrays[split] = (images, labels)
    return arrays


def load(root: Path, name=None, train_dir=None, test_dir=None, num_classes=None) -> tuple:
    """The train and test splits finder.load reads for these options."""
    source = Source(root, name, train_dir, test_dir, num_classes)
    found = finder.load(DataOptions(), source, BUILTIN)[1]
    finder.num_classes(found, num_classes)
    return found["train"], found["test"]


def assert_loaded(root: Path, arrays: dict, name: str | None = None) -> None:
    train, test = load(root, name)
    for (images, labels), split in ((arrays["train"], train), (arrays["test"], test)):
        np.testing.assert_array_equal(split.arrays[:, 0], images)
        np.testing.assert_array_equal(split.labels, labels)
        assert split.labels.dtype == np.int64


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_reads_every_layout(tmp_path: Path, layout: str, gz: bool) -> None:
    assert_loaded(tmp_path, write_dataset(tmp_path, layout, gz))


@pytest.mark.parametrize("fmt", ["zip", "gztar"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_reads_an_archive_of_any_layout_once(
    tmp_path: Path, fmt: str, gz: bool, layout: str
) -> None:
    arrays = write_dataset(tmp_path / "src", layout, gz)
    root = tmp_path / "mounted"
    root.mkdir()
    archive = Path(shutil.make_archive(str(root / "MnistDataset"), fmt, tmp_path / "src"))
    assert_loaded(root, arrays)
    unpacked = root / "MnistDataset"
    assert unpacked.is_dir() and archive.is_file()
    stamp = unpacked.stat().st_mtime_ns
    assert_loaded(root, arrays)  # the second run reuses what the first unpacked
    assert unpacked.stat().st_mtime_ns == stamp


def test_a_tar_with_a_link_out_of_the_tree_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "evil.tar.gz"
    with tarfile.open(bad, "w:gz") as handle:
        link = tarfile.TarInfo("escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        handle.addfile(link)
    with pytest.raises(StorageError, match="cannot unpack"):
        select(tmp_path, "evil", "auto", BUILTIN)
    assert not (tmp_path / "evil").exists()


def test_dataset_name_picks_one_of_several(tmp_path: Path) -> None:
    arrays = write_dataset(tmp_path / "mnist", "split")
    write_dataset(tmp_path / "other", "flat")
    assert_loaded(tmp_path, arrays, "mnist")
    with pytest.raises(DatasetError, match=r"holds several datasets \(mnist, other\) and none"):
        load(tmp_path)
    with pytest.raises(
        DatasetError, match="--dataset_name nope: no nope in .* it holds mnist, other"
    ):
        load(tmp_path, "nope")


def test_the_only_dataset_is_taken(tmp_path: Path) -> None:
    assert_loaded(tmp_path, write_dataset(tmp_path / "MnistDataset", "torchvision"))


def test_traindata_and_testdata_name_each_split(tmp_path: Path) -> None:
    arrays = write_dataset(tmp_path, "split")
    train, test = load(tmp_path / "nowhere", None, tmp_path / "train", tmp_path / "test")
    np.testing.assert_array_equal(train.labels, arrays["train"][1])
    np.testing.assert_array_equal(test.labels, arrays["test"][1])


def test_missing_directory_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load(tmp_path / "nowhere")
    with pytest.raises(DatasetError, match="is empty; looked for MNIST idx files"):
        load(tmp_path)


def test_missing_file_names_it_and_the_search(tmp_path: Path) -> None:
    write_dataset(tmp_path, "split")
    (tmp_path / "test" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetError) as err:
        load(tmp_path)
    assert "t10k-labels-idx1-ubyte[.gz] not found in" in str(err.value)
    assert "\n" not in str(err.value)


def test_labels_must_fit_the_classes(tmp_path: Path) -> None:
    write_dataset(tmp_path, "flat")
    with pytest.raises(DatasetError, match="but num_classes is 2: raise it or leave it unset"):
        load(tmp_path, num_classes=2)


def test_ids_of_text_have_every_class_their_tokenizer_may_encode() -> None:
    # Bytes of plain ASCII text reach 126 at most; a prompt may hold any of the 256.
    ids = np.frombuffer(b"plain ascii text, a position each", dtype=np.uint8).astype(np.int64)
    text = array_split(ids[None, :-1], ids[None, 1:], tokenizer=ByteTokenizer())
    assert finder.num_classes({"train": text}, None) == 256
    assert finder.num_classes({"train": replace(text, tokenizer=None)}, None) == ids.max() + 1


def test_a_smoke_run_without_data_takes_its_tokenizers_ids(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A model of text smoke-tested where there is no data (an image holds none): ids of
    # data.tokenizer, recorded for predict.py; bytes stand in where its file is absent too.
    source = Source(tmp_path / "none")
    made = finder.splits(DataOptions(), source, BUILTIN, (16,), smoke=(8, 4), ids=True)
    assert (made.info.tokenizer, made.info.num_classes) == ({"kind": "bytes"}, 256)
    assert made.train.labels.shape == (8, 16) and made.train.arrays.max() < 256
    absent = DataOptions(tokenizer=Path("absent/tokenizer.json"))
    with caplog.at_level(logging.WARNING):
        made = finder.splits(absent, source, BUILTIN, (16,), smoke=(8, 4), ids=True)
    assert made.info.tokenizer == {"kind": "bytes"}
    assert "no such file or directory" in caplog.text and "UTF-8 bytes stand in" in caplog.text


def test_bad_magic_truncation_and_count_mismatch(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="bad magic"):
        read_idx(write(tmp_path / "a-idx1-ubyte", b"\x00\x00\x0d\x01" + struct.pack(">I", 0)))
    data = idx(np.zeros((4, 28, 28), dtype=np.uint8))
    with pytest.raises(DatasetError, match="truncated"):
        read_idx(write(tmp_path / "b-idx3-ubyte", data[:-10], gz=True))
    write_dataset(tmp_path / "c", "flat")
    write(tmp_path / "c" / "train-labels-idx1-ubyte", idx(np.zeros(4, dtype=np.uint8)))
    with pytest.raises(DatasetError, match="5 images but .* 4 labels"):
        load(tmp_path / "c")


def test_validation_split_depends_on_the_seed_only() -> None:
    data = synthetic(100, (1, 28, 28), 10, seed=3)
    train, val = hold_out(data, 0.1, seed=5)
    again_train, again_val = hold_out(data, 0.1, seed=5)
    assert len(val) == 10 and len(train) == 90
    np.testing.assert_array_equal(val.arrays, again_val.arrays)
    np.testing.assert_array_equal(train.labels, again_train.labels)
    joined = np.concatenate([train.arrays, val.arrays]).reshape(100, -1)
    assert len(np.unique(joined, axis=0)) == len(np.unique(data.arrays.reshape(100, -1), axis=0))
    other = hold_out(data, 0.1, seed=6)[1]
    assert not np.array_equal(other.arrays, val.arrays)
