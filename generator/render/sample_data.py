"""Write the sample dataset every project ships: scikit-learn's digits as MNIST idx files.

The 1,797 real 8x8 scans of the UCI handwritten digits data set are scaled up
to MNIST's 28x28 uint8 format, so a freshly generated project trains out of the
box with no download and the same loader later reads the real MNIST.
Regenerate the template's copy with ``python -m generator.render.sample_data``.
"""

from __future__ import annotations

import gzip
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Where the template keeps the copy every generated project receives.
TEMPLATE_DATA_DIR = Path(__file__).resolve().parents[2] / "{{cookiecutter.project}}" / "data"

SEED = 0
TEST_FRACTION = 0.2
SCALE = 3  # each 8x8 pixel becomes a 3x3 block: 24x24 ...
PAD = 2  # ... padded to MNIST's 28x28, the digit centred as in MNIST
IDX_UBYTE = 0x08


@dataclass(frozen=True)
class MnistArrays:
    """A dataset in MNIST's shapes: uint8 images (N, 28, 28), uint8 labels (N,)."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def _stratified_test_mask(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Pick ``fraction`` of every class for the test split, reproducibly.

    Written out rather than taken from sklearn's train_test_split so that the
    shipped files depend only on the digits themselves and a numpy seed.
    """
    rng = np.random.default_rng(seed)
    mask = np.zeros(len(labels), dtype=bool)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        count = round(len(members) * fraction)
        mask[rng.permutation(members)[:count]] = True
    return mask


def digits_as_mnist(seed: int = SEED, test_fraction: float = TEST_FRACTION) -> MnistArrays:
    """scikit-learn's digits, upscaled to 28x28 uint8 and split 80/20 per class."""
    # Imported here: only regenerating the data needs scikit-learn.
    from sklearn.datasets import load_digits

    digits = load_digits()
    # The scans hold 0..16 ink levels; MNIST uses 0..255.
    pixels = np.rint(digits.images * (255 / 16)).astype(np.uint8)
    blocks = pixels.repeat(SCALE, axis=1).repeat(SCALE, axis=2)
    images = np.pad(blocks, ((0, 0), (PAD, PAD), (PAD, PAD)))
    labels = digits.target.astype(np.uint8)
    test = _stratified_test_mask(labels, test_fraction, seed)
    return MnistArrays(images[~test], labels[~test], images[test], labels[test])


def idx_bytes(array: np.ndarray) -> bytes:
    """An uint8 array in the idx format: magic (0, 0, type, ndim), big-endian dims, data."""
    if array.dtype != np.uint8:
        raise ValueError(f"idx files here hold uint8 data, not {array.dtype}")
    header = struct.pack(f">BBBB{array.ndim}I", 0, 0, IDX_UBYTE, array.ndim, *array.shape)
    return header + np.ascontiguousarray(array).tobytes()


def write_idx(path: Path, array: np.ndarray, gz: bool = True) -> Path:
    """Write ``array`` to ``path`` (``path.gz`` when gz), byte-for-byte reproducible."""
    data = idx_bytes(array)
    if gz:
        path = path.with_name(path.name + ".gz")
        # mtime=0 and no file name in the header: the same array gives the same bytes.
        data = gzip.compress(data, compresslevel=9, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_sample_dataset(dest: Path, gz: bool = True) -> list[Path]:
    """Write the digits in OpenI's layout (``train/``, ``test/``) under dest; return the files."""
    arrays = digits_as_mnist()
    files = {
        "train/train-images-idx3-ubyte": arrays.train_images,
        "train/train-labels-idx1-ubyte": arrays.train_labels,
        "test/t10k-images-idx3-ubyte": arrays.test_images,
        "test/t10k-labels-idx1-ubyte": arrays.test_labels,
    }
    return [write_idx(dest / name, array, gz=gz) for name, array in files.items()]


# The demo text of language-model projects (task lm): Python's documentation topics (PSF).
TEMPLATE_TEXT = TEMPLATE_DATA_DIR.parent / "_lm" / "data" / "pydoc-topics.txt"


def write_text_corpus(dest: Path = TEMPLATE_TEXT) -> Path:
    """Every topic of ``pydoc_data.topics``, in name order, as one UTF-8 file."""
    from pydoc_data.topics import topics

    dest.write_text("".join(topics[key] for key in sorted(topics)), encoding="utf-8")
    return dest


if __name__ == "__main__":
    for written in write_sample_dataset(
        Path(sys.argv[1]) if len(sys.argv) > 1 else TEMPLATE_DATA_DIR
    ):
        print(written)
