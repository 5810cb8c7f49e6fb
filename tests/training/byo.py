"""Data a researcher brings, written from scikit-learn's digits: an ImageFolder of RGB PNGs
and a CSV of the 64 features. Shared by the bring-your-own tests and the data benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from generator.render.sample_data import digits_as_mnist

FEATURES = 64


def _digits_rgb(size: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Train and test digits as uint8 RGB (N, size, size, 3): ink in a per-class colour
    tint, so the three channels differ."""
    from PIL import Image

    arrays = digits_as_mnist()
    out = {}
    for split, images, labels in (
        ("train", arrays.train_images, arrays.train_labels),
        ("test", arrays.test_images, arrays.test_labels),
    ):
        resized = np.stack(
            [np.asarray(Image.fromarray(im).resize((size, size), Image.BILINEAR)) for im in images]
        )
        tint = np.array([[1.0, 0.8, 0.6]], dtype=np.float32)
        rgb = (resized[..., None].astype(np.float32) * tint[:, None, None, :]).astype(np.uint8)
        out[split] = (rgb, labels)
    return out


def write_imagefolder(
    root: Path, size: int = 32, splits: tuple[str, ...] = ("train", "test"), copies: int = 1
) -> Path:
    """root/<split>/<digit>/<n>.png; ``copies`` writes each image that many times (a
    bigger set for the benchmark). A single split name "all" writes class folders at root."""
    from PIL import Image

    data = _digits_rgb(size)
    for split in splits:
        images, labels = data["test" if split == "test" else "train"]
        base = root if split == "all" else root / split
        for copy in range(copies):
            for index, (image, label) in enumerate(zip(images, labels, strict=True)):
                folder = base / str(int(label))
                folder.mkdir(parents=True, exist_ok=True)
                Image.fromarray(image).save(folder / f"{copy}_{index:05d}.png")
    return root


def write_csv(root: Path, label_column: str = "label") -> Path:
    """root/train.csv and root/test.csv: the digits' 64 features (0-16) and the label."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    cut = int(len(order) * 0.8)
    root.mkdir(parents=True, exist_ok=True)
    header = ",".join([*(f"f{i}" for i in range(FEATURES)), label_column])
    for split, rows in (("train", order[:cut]), ("test", order[cut:])):
        lines = [header]
        for row in rows:
            values = [str(int(v)) for v in digits.data[row]]
            lines.append(",".join([*values, str(int(digits.target[row]))]))
        (root / f"{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


# Four of the digits under names of their own: a user's image folder of named classes.
NAMED = {0: "ant", 1: "bee", 2: "cat", 3: "dog"}


def write_named_classes(root: Path, sizes: tuple[int, ...] = (32, 40), per_class: int = 60) -> Path:
    """root/train/<name>/ and root/test/<name>/ of RGB PNGs, the digits 0-3 named as NAMED,
    the images alternating between ``sizes`` (a folder that needs data.resize)."""
    from PIL import Image

    data = {size: _digits_rgb(size) for size in sizes}
    for split in ("train", "test"):
        count = per_class if split == "train" else per_class // 3
        for digit, name in NAMED.items():
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for size, images in data.items():
                pictures, labels = images[split]
                chosen = np.flatnonzero(labels == digit)[: count // len(sizes)]
                for index in chosen:
                    Image.fromarray(pictures[index]).save(folder / f"{size}_{index:05d}.png")
    return root
