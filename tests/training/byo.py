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


# A character-level language model written into a classification project (README: "A model
# of sequences"): text as ids, a GRU, a class a position. The step comes from the README.
BLOCK = 32  # characters a sample
TEXT_CHARS = 60_000  # of the Python docs' topics (pydoc_data, PSF licence): 1,874 samples

CHAR_READER = f'''

from pathlib import Path  # noqa: E402

from src.scaffold import CharTokenizer, Reader, Split, array_split, reader  # noqa: E402


@reader("chars")
class CharReader(Reader):
    """text.txt as samples of {BLOCK} characters, each labelled by the characters after it."""

    looks_for = "text.txt"

    def found(self, directory: Path) -> str | None:
        return "text.txt" if (directory / "text.txt").is_file() else None

    def read(self, directory: Path) -> dict[str, Split]:
        text = (directory / "text.txt").read_text(encoding="utf-8")
        vocabulary = sorted(set(text))
        index = {{char: i for i, char in enumerate(vocabulary)}}
        ids = np.array([index[char] for char in text], dtype=np.int64)
        count = (len(ids) - 1) // {BLOCK}
        inputs = ids[: count * {BLOCK}].reshape(count, {BLOCK})
        labels = ids[1 : count * {BLOCK} + 1].reshape(count, {BLOCK})
        tokenizer = CharTokenizer(tuple(vocabulary))  # what predict.py --prompt encodes with
        return {{"all": array_split(inputs, labels, vocabulary, tokenizer)}}
'''

CHAR_MODEL = {
    "pytorch": f'''

class CharGRU(nn.Module):
    """Embeddings, a GRU, and a score for each character of the vocabulary at each position."""

    def __init__(self, vocabulary: int, width: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.gru(self.embed(ids))
        return self.head(hidden)


@model("chargru", input_shape=({BLOCK},), head="head")
def chargru(shape: DataShape, width: int = 64) -> nn.Module:
    return CharGRU(shape.num_classes, width)
''',
    "mindspore": f'''

class CharGRU(nn.Cell):
    """Embeddings, a GRU, and a score for each character of the vocabulary at each position."""

    def __init__(self, vocabulary: int, width: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Dense(width, vocabulary)

    def construct(self, ids):
        hidden, _ = self.gru(self.embed(ids))
        return self.head(hidden)


@model("chargru", input_shape=({BLOCK},), head="head")
def chargru(shape: DataShape, width: int = 64) -> nn.Cell:
    return CharGRU(shape.num_classes, width)
''',
}


def write_text(root: Path) -> Path:
    """root/text.txt: the first TEXT_CHARS characters of Python's own documentation topics."""
    from pydoc_data.topics import topics

    root.mkdir(parents=True, exist_ok=True)
    text = "".join(topics[key] for key in sorted(topics))[:TEXT_CHARS]
    (root / "text.txt").write_text(text, encoding="utf-8")
    return root


# Mistakes in a sequence model's step, each one line before any training: the loss not
# reduced to one number (4 samples x 32 positions), a metric of one number a position.
STEP_MISTAKES = {
    "pytorch": (
        (
            "\n\ndef loss(outputs, labels):\n"
            "    flat = outputs.flatten(0, -2)\n"
            '    return F.cross_entropy(flat, labels.flatten(), reduction="none")\n',
            "src/step.py's loss returns shape (128,): it must return one number",
        ),
        (
            "\n\ndef metrics(outputs, labels):\n"
            "    scores = outputs.transpose(1, 2)\n"
            '    return {"loss": F.cross_entropy(scores, labels, reduction="none")}\n',
            "src/step.py's metrics returns loss of shape (4, 32): each must be one number",
        ),
    ),
    "mindspore": (
        (
            "\n\ndef loss(outputs, labels):\n"
            "    flat = outputs.reshape(-1, outputs.shape[-1])\n"
            '    return ops.cross_entropy(flat, labels.reshape(-1), reduction="none")\n',
            "src/step.py's loss returns shape (128,): it must return one number",
        ),
        (
            '\n\ndef metrics(outputs, labels):\n    return {"loss": -outputs.max(axis=-1)}\n',
            "src/step.py's metrics returns loss of shape (4, 32): each must be one number",
        ),
    ),
}
