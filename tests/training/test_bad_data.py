"""Bad data stops train.py before it writes anything, with one line naming the problem."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.training import runs


def _images(root: Path, imagefolder: Path) -> Path:
    """Two classes of three digits each, in train/ and test/."""
    for split in ("train", "test"):
        for label in ("0", "1"):
            (root / split / label).mkdir(parents=True)
            for png in sorted((imagefolder / split / label).iterdir())[:3]:
                shutil.copy(png, root / split / label)
    return root


def _table(root: Path, rows: list[str], header: str = "a,b,label") -> Path:
    root.mkdir(parents=True)
    for split in ("train", "test"):
        (root / f"{split}.csv").write_text("\n".join([header, *rows]) + "\n")
    return root


def empty_class(root: Path, images: Path) -> str:
    for png in (_images(root, images) / "train" / "1").iterdir():
        png.unlink()
    return "class folder"


def mixed_sizes(root: Path, images: Path) -> str:
    from PIL import Image

    Image.new("RGB", (20, 20)).save(_images(root, images) / "train" / "1" / "small.png")
    return "images of different sizes"


def not_an_image(root: Path, images: Path) -> str:
    (_images(root, images) / "train" / "0" / "labels.txt").write_text("0\n")
    return "labels.txt is not an image"


def other_classes(root: Path, images: Path) -> str:
    shutil.rmtree(_images(root, images) / "test" / "1")
    return "train and test splits have different classes"


def no_label_column(root: Path, images: Path) -> str:
    _table(root, ["1,2,3", "4,5,6"], "a,b,c")
    return "has no label column 'label'"


def non_numeric(root: Path, images: Path) -> str:
    _table(root, ["1,2,0", "1,two,1"])
    return "column 'b': 'two' is not a number"


def ragged(root: Path, images: Path) -> str:
    _table(root, ["1,2,0", "1,1"])
    return "line 3 has 2 fields, the header has 3"


CASES = [
    empty_class,
    mixed_sizes,
    not_an_image,
    other_classes,
    no_label_column,
    non_numeric,
    ragged,
]
# MindSpore reads its data through the same code: two cases show the line reaches its user.
MINDSPORE_CASES = [not_an_image, ragged]


@pytest.mark.parametrize(
    ("project", "case"),
    [("pytorch", case) for case in CASES] + [("model", case) for case in MINDSPORE_CASES],
    ids=[f"pytorch-{c.__name__}" for c in CASES]
    + [f"mindspore-{c.__name__}" for c in MINDSPORE_CASES],
)
def test_bad_data_is_one_line_and_nothing_is_written(
    pytorch_project: Path,
    mindspore_projects: dict,
    imagefolder: Path,
    tmp_path: Path,
    project: str,
    case,
) -> None:
    expected = case(tmp_path / "data", imagefolder)
    output = tmp_path / "out"
    where = pytorch_project if project == "pytorch" else mindspore_projects[project]
    result = runs.run(
        where,
        "train.py",
        "--data_url",
        str(tmp_path / "data"),
        "--train_url",
        str(output),
        "--device_target",
        "cpu",
    )
    runs.assert_one_line_exit_2(result, expected)
    assert not output.exists()
