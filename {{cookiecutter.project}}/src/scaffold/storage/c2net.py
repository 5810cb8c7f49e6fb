"""OpenI C2Net (智算网络) jobs: storage described by environment variables.

The platform sets DATA_DOWNLOAD_METHOD (MOUNT: the data is already mounted;
MOXING: copy it from OBS), DATASET_URL and PRETRAIN_MODEL_URL (JSON lists of
what to copy), the LOCAL_*_PATH directories, OUTPUT_URL and the *_NEED_UNZIP
switches. OpenI's `c2net` package reads them: with it installed, its
``c2net.context.prepare()`` fetches the data and ``upload_output()`` sends the
outputs back. Without it the same variables are honoured here, the same way.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from src.scaffold.errors import ConfigError, StorageError
from src.scaffold.storage import obs
from src.scaffold.storage.archives import archive_stem

MARKERS = ("DATA_DOWNLOAD_METHOD", "LOCAL_DATASET_PATH", "LOCAL_OUTPUT_PATH")
METHODS = ("MOUNT", "MOXING")
# What c2net prints before a failure it does not raise (its uploads swallow errors).
FAILED = "\u274c"


def active() -> bool:
    """Whether this job was started by C2Net (its variables are set)."""
    return any(os.environ.get(name) for name in MARKERS)


def _path(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value) if value else None


@dataclass(frozen=True)
class C2netEnv:
    """The C2Net variables of this job."""

    method: str
    dataset: Path | None
    pretrained: Path | None
    output: Path | None
    tensorboard: Path | None
    output_url: str | None

    @classmethod
    def read(cls) -> C2netEnv:
        method = os.environ.get("DATA_DOWNLOAD_METHOD", "MOUNT").strip().upper()
        if method not in METHODS:
            raise ConfigError(f"DATA_DOWNLOAD_METHOD={method!r} is not one of {', '.join(METHODS)}")
        return cls(
            method,
            _path("LOCAL_DATASET_PATH"),
            _path("LOCAL_PRETRAIN_MODEL_PATH"),
            _path("LOCAL_OUTPUT_PATH"),
            _path("LOCAL_TENSORBOARD_PATH"),
            os.environ.get("OUTPUT_URL", "").strip() or None,
        )


def package() -> ModuleType | None:
    """OpenI's c2net package, when installed."""
    try:
        return importlib.import_module("c2net.context")
    except ImportError:
        return None


def _listing(variable: str, name_key: str, url_key: str) -> list[tuple[str, str]]:
    """(name, url) pairs from a JSON list variable such as DATASET_URL."""
    text = os.environ.get(variable, "").strip()
    if not text or text == "[]":
        return []
    try:
        return [(str(item[name_key]), str(item[url_key])) for item in json.loads(text)]
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(
            f'{variable} must be a JSON list of objects with "{name_key}" and "{url_key}"'
        ) from err


def _copy_listed(variable: str, keys: tuple[str, str], dest: Path | None) -> None:
    for name, url in _listing(variable, *keys):
        if dest is None:
            raise ConfigError(f"{variable} is set but its LOCAL_..._PATH is not")
        dest.mkdir(parents=True, exist_ok=True)
        # An archive is one object; a dataset folder is a tree.
        obs.copy(url, str(dest / name), tree=archive_stem(Path(name)) is None)


def prepare(env: C2netEnv) -> None:
    """Fetch the dataset and the pretrained model as the job's variables say.

    Run by one process per node (src/scaffold/storage/once.py): c2net's own prepare() when the
    package is installed, else the same copies with moxing (MOXING) or nothing
    (MOUNT: the platform mounted them). Archives are unpacked when read.
    """
    c2net = package()
    if c2net is not None:
        _quietly(c2net.prepare, "c2net could not prepare the job")
        return
    if env.method == "MOXING":
        _copy_listed("DATASET_URL", ("dataset_name", "dataset_url"), env.dataset)
        _copy_listed("PRETRAIN_MODEL_URL", ("model_name", "model_url"), env.pretrained)


def _quietly(call: Callable[[], object], failed: str) -> None:
    """Run one of c2net's steps, its banner and progress kept off our output. It raises
    ValueError for a missing variable but only prints a failed copy: read what it said."""
    with contextlib.redirect_stdout(io.StringIO()) as said:
        try:
            call()
        except ValueError as err:
            raise ConfigError(f"{failed}: {err}") from err
    failures = [line for line in said.getvalue().splitlines() if FAILED in line]
    if failures:
        raise StorageError(f"{failed}: {failures[0].strip()}")


def upload_output() -> None:
    """Send LOCAL_OUTPUT_PATH to OUTPUT_URL with c2net's upload_output()."""
    c2net = package()
    assert c2net is not None
    _quietly(c2net.upload_output, "c2net upload_output failed")
