"""Every data format through every way a platform hands data over, in one table: a local
directory, an OBS copy (moxing stand-in), a C2Net zip (MOXING) and mount (MOUNT), and
--traindata/--testdata. The project's own staging and reading run as train.py runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.training.runs import FAKE_MOXING, c2net_env, clean_env, run

# train.py's first steps: storage staged, then the data found and read into splits.
READ = """
import json, logging, sys
logging.basicConfig(level=logging.INFO)
from src.scaffold.data import finder
from src.scaffold.storage import where as storage
from src.scaffold.config import parse_config
from src.scaffold.data.readers import BUILTIN
from src.scaffold.backend import ProjectConfig
cfg = parse_config(sys.argv[1:], ProjectConfig)
where = storage.prepare(cfg.places())
splits = finder.splits(cfg.data, cfg.source(where.data), BUILTIN)
print(json.dumps({**splits.info.record(), "sizes": [len(splits.train), len(splits.val),
                  len(splits.test)]}))
"""
# The digits: 1,437 training and 360 test samples, whatever the format.
SAMPLES = 1797
SHAPES = {"mnist": [1, 28, 28], "imagefolder": [3, 32, 32], "csv": [64]}
PATHS = ("local", "obs", "c2net-zip", "c2net-mount", "traindata")


@pytest.fixture(scope="module")
def datasets(digits_dir: Path, imagefolder: Path, table_dir: Path, tmp_path_factory) -> dict:
    """Each format as a dataset directory, and its train and test halves apart (for
    --traindata/--testdata: the idx files' split folders, the image classes' split folders,
    and each CSV file in a folder of its own)."""
    halves = tmp_path_factory.mktemp("halves")
    for split in ("train", "test"):
        (halves / "csv" / split).mkdir(parents=True)
        shutil.copy(table_dir / f"{split}.csv", halves / "csv" / split)
    return {
        "mnist": (digits_dir, digits_dir / "train", digits_dir / "test"),
        "imagefolder": (imagefolder, imagefolder / "train", imagefolder / "test"),
        "csv": (table_dir, halves / "csv" / "train", halves / "csv" / "test"),
    }


def staged(path: str, dataset: tuple[Path, Path, Path], tmp_path: Path) -> tuple[list, dict]:
    """The arguments and environment of a job that gets ``dataset`` by ``path``."""
    root, train, test = dataset
    if path == "local":
        return ["--data_url", str(root)], {}
    if path == "traindata":
        return [
            "--data_url",
            str(tmp_path / "none"),
            "--traindata",
            str(train),
            "--testdata",
            str(test),
        ], {}
    obs = tmp_path / "obs"
    moxing = {
        "PYTHONPATH": str(FAKE_MOXING),
        "FAKE_OBS_ROOT": str(obs),
        "TRAIN_CACHE_DIR": str(tmp_path / "cache"),
    }
    if path == "obs":
        shutil.copytree(root, obs / "bucket" / "mine")
        return ["--data_url", "obs://bucket/mine"], moxing
    env = c2net_env(tmp_path / "c2net", "MOXING" if path == "c2net-zip" else "MOUNT")
    if path == "c2net-zip":
        (obs / "bucket" / "code").mkdir(parents=True)  # the job's code, which c2net fetches
        shutil.make_archive(str(obs / "bucket" / "MnistDataset"), "zip", root)
        return [], {**moxing, **env}
    shutil.make_archive(str(Path(env["LOCAL_DATASET_PATH"]) / "MnistDataset"), "zip", root)
    return [], env


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fmt", list(SHAPES))
def test_every_format_arrives_by_every_path(
    pytorch_project: Path, datasets: dict, tmp_path: Path, fmt: str, path: str
) -> None:
    args, env = staged(path, datasets[fmt], tmp_path)
    result = run(
        pytorch_project,
        "-c",
        READ,
        *args,
        "--train_url",
        str(tmp_path / "out"),
        env=clean_env(**env),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    info = json.loads(result.stdout.splitlines()[-1])
    assert (info["data_format"], info["data_shape"]) == (fmt, SHAPES[fmt])
    assert info["num_classes"] == 10 and sum(info["sizes"]) == SAMPLES
    # auto said what it found, and why.
    assert f"data: {fmt} format in " in result.stdout + result.stderr
