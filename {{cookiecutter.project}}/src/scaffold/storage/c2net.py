"""OpenI C2Net (智算网络) jobs: storage from environment variables, via `c2net` if installed."""

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
FAILED = "\u274c"  # what c2net prints before a failure it does not raise


def active() -> bool:
    """Whether this job was started by C2Net (its variables are set)."""
    return any(os.environ.get(name) for name in MARKERS)


@dataclass(frozen=True)
class C2netEnv:
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
        names = ("DATASET", "PRETRAIN_MODEL", "OUTPUT", "TENSORBOARD")
        paths = [os.environ.get(f"LOCAL_{name}_PATH", "").strip() for name in names]
        url = os.environ.get("OUTPUT_URL", "").strip() or None
        return cls(method, *[Path(path) if path else None for path in paths], url)


def package() -> ModuleType | None:
    try:
        return importlib.import_module("c2net.context")
    except ImportError:
        return None


def _copy_listed(variable: str, name_key: str, url_key: str, dest: Path | None) -> None:
    """Copy into ``dest`` what a JSON list variable such as DATASET_URL names."""
    text = os.environ.get(variable, "").strip() or "[]"
    try:
        listed = [(str(item[name_key]), str(item[url_key])) for item in json.loads(text)]
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(
            f'{variable} must be a JSON list of objects with "{name_key}" and "{url_key}"'
        ) from err
    for name, url in listed:
        if dest is None:
            raise ConfigError(f"{variable} is set but its LOCAL_..._PATH is not")
        dest.mkdir(parents=True, exist_ok=True)
        obs.copy(url, str(dest / name), tree=archive_stem(Path(name)) is None)  # archive: a file


def prepare(env: C2netEnv) -> None:
    """Fetch the dataset and pretrained model: c2net's prepare(), else moxing (MOXING) or none."""
    c2net = package()
    if c2net is not None:
        _quietly(c2net.prepare, "c2net could not prepare the job")
    elif env.method == "MOXING":
        _copy_listed("DATASET_URL", "dataset_name", "dataset_url", env.dataset)
        _copy_listed("PRETRAIN_MODEL_URL", "model_name", "model_url", env.pretrained)


def _quietly(call: Callable[[], object], failed: str) -> None:
    """Run a c2net step quietly; it only prints a failed copy, so read what it said."""
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
