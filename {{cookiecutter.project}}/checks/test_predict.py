"""What predict.py and export.py are made of, without a model to train: the rows (class
names, probabilities, the top k), new inputs read as the run read its data, and what a
checkpoint must record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from src.scaffold.backend import ProjectConfig
from src.scaffold.config import parse_script
from src.scaffold.errors import CheckpointError, ConfigError, DatasetError
from src.scaffold.infer.inputs import gather
from src.scaffold.infer.predict import options, rows
from src.scaffold.infer.recorded import Recorded

META = {
    "model_name": "lenet",
    "data_shape": [1, 8, 8],
    "num_classes": 3,
    "classes": ["ant", "bee", "cat"],
    "data_mean": [100.0],
    "data_std": [50.0],
    "data_format": "imagefolder",
}


def recorded(**changes: object) -> Recorded:
    return Recorded.of(Path("run/lenet_epoch1.pt"), {**META, **changes})


def test_rows_name_the_classes_with_probabilities_and_the_top_k() -> None:
    outputs = np.array([[0.0, 2.0, 1.0], [5.0, 5.0, -1.0]], dtype=np.float32)
    first, second = rows(recorded(), ("a.png", "b.png"), outputs, top_k=2)
    assert (first["input"], first["class"]) == ("a.png", "bee")
    assert [t["class"] for t in first["top_k"]] == ["bee", "cat"]
    # softmax of (0, 2, 1): e^2 / (1 + e^2 + e) = 0.665241, to the 6 decimals kept.
    assert first["probability"] == 0.665241
    # A tie keeps the classes' order: the same row on every run.
    assert [t["class"] for t in second["top_k"]] == ["ant", "bee"]


def test_a_numeric_target_gives_its_value() -> None:
    (row,) = rows(recorded(numeric=True, num_classes=1), ("r",), np.array([[2.5]]), 5)
    assert row == {"input": "r", "value": 2.5}


def test_a_checkpoint_without_its_model_or_shape_is_refused() -> None:
    with pytest.raises(CheckpointError, match="does not record its model_name, data_shape"):
        Recorded.of(Path("x.pt"), {"epoch": 1})


def images(folder: Path, size: tuple[int, int], count: int = 2) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{i}.png" for i in range(count)]
    for i, path in enumerate(paths):
        Image.new("RGB", size, (i * 40, 0, 0)).save(path)
    return paths


def test_images_are_read_as_the_run_read_them(tmp_path: Path) -> None:
    images(tmp_path / "in" / "sub", (8, 8))
    found = gather([str(tmp_path / "in")], recorded())
    assert found.names == tuple(str(tmp_path / "in" / "sub" / f"{i}.png") for i in range(2))
    (names, batch), *_ = list(found.batches(32))
    # Converted to the run's channels (L): one channel, uint8, as the run decoded them.
    assert batch.shape == (2, 1, 8, 8) and batch.dtype == np.uint8


def test_an_image_of_another_size_is_resized_only_where_the_run_resized(tmp_path: Path) -> None:
    (path, _) = images(tmp_path, (10, 12))
    with pytest.raises(DatasetError, match=r"is 10x12 pixels; the model takes 8x8"):
        gather([str(path)], recorded()).load(0)
    assert gather([str(path)], recorded(data_resize=[8, 8])).load(0).shape == (1, 8, 8)


def test_inputs_that_do_not_fit_the_model_are_named(tmp_path: Path) -> None:
    table = tmp_path / "rows.csv"
    table.write_text("a,b\n1,2\n")
    with pytest.raises(DatasetError, match="rows.csv is not an image"):
        gather([str(table)], recorded())
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="empty holds no an image"):
        gather([str(tmp_path / "empty")], recorded())
    with pytest.raises(DatasetError, match="gone.png: no such file or folder"):
        gather([str(tmp_path / "gone.png")], recorded())
    with pytest.raises(ConfigError, match="give the images or folders of them to predict on"):
        gather([], recorded())


def table(**changes: object) -> Recorded:
    return recorded(
        data_shape=[3],
        data_features=["f0", "f1", "f2"],
        label_column="label",
        data_format="csv",
        **changes,
    )


def test_table_rows_are_read_by_column_name_the_label_optional(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("f2,label,f0,f1\n3,x,1,2\n\n6,y,4,5\n")
    found = gather([str(path)], table())
    assert found.names == (f"{path}:2", f"{path}:4")
    (_, batch), *_ = list(found.batches(8))
    assert batch.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f0,f1,x\n1,2,3\n", "has other columns than the training data: lacks f2; has x"),
        ("f0,f1,f2\n1,2,nan\n", "line 2, column 'f2': 'nan' is not a finite number"),
        ("f0,f1,f2\n", "has a header but no rows"),
    ],
)
def test_a_table_that_does_not_fit_is_one_line_naming_it(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(text)
    with pytest.raises(DatasetError, match=f"rows.csv.*{message}"):
        gather([str(path)], table())


def test_inputs_may_come_between_the_options() -> None:
    argv = ["a.png", "--batch_size", "8", "b.png", "--top_k", "2", "--checkpoint", "last"]
    cfg, args = parse_script(argv, ProjectConfig, "predict", options)
    assert (args.inputs, args.top_k, args.checkpoint) == (["a.png", "b.png"], 2, "last")
    assert cfg.batch_size == 8 and "inputs" not in vars(cfg)
