"""Your data: readers of your own formats, and the augmentation of training images.

Three formats are built in (config.yaml's data: format): mnist (idx files), imagefolder
(a folder of images per class) and csv (a table; data: labels: values for a numeric
target). For another format, write a Reader here and mark it with @reader("name"); set
data: format: name in config.yaml (auto tries the built-in ones, then yours). read()
returns {"train": Split, "test": Split} (and "val" if the data has one), or
{"all": Split} for data to be split by data.test_fraction. An example, for .npz files
holding the arrays x (N, C, H, W) uint8 and y (N,) class indices:

    @reader("npz")
    class NpzReader(Reader):
        looks_for = "train.npz and test.npz"

        def found(self, directory: Path) -> str | None:
            return "train.npz" if (directory / "train.npz").is_file() else None

        def read(self, directory: Path) -> dict[str, Split]:
            splits = {}
            for name in ("train", "test"):
                arrays = np.load(directory / f"{name}.npz")
                splits[name] = array_split(arrays["x"], arrays["y"])
            return splits

Readers get config.yaml's data: section as self.options (label_column, resize, labels).
"""

from __future__ import annotations

import numpy as np

from src.scaffold import augment as standard_augment


def augment(image: np.ndarray, rng: np.random.Generator, crop: int, flip: bool) -> np.ndarray:
    """One uint8 (C, H, W) training image, augmented: data.random_crop pads by ``crop``
    pixels and cuts back at random, data.random_flip flips left-right half the time.
    Off unless config.yaml asks; change it here (it runs in the loader's workers)."""
    return standard_augment(image, rng, crop, flip)
