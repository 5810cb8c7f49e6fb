"""Where a run reads and writes on this node and where outputs go, on every platform."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from src.scaffold.config import DEFAULT_CONFIG, Places
from src.scaffold.config.converters import AUTO
from src.scaffold.errors import ConfigError
from src.scaffold.storage import c2net, obs
from src.scaffold.storage.once import Once
from src.scaffold.storage.retry import Retry
from src.scaffold.storage.uploads import C2netRemote, ObsRemote, Remote

OPENI_DIRS = ("/dataset", "/model")  # OpenI's GPU jobs mount data and collect outputs here
MODELARTS_VARS = ("MA_CURRENT_IP", "MA_JOB_DIR", "MA_CURRENT_HOST_IP")
PLATFORM_CACHE = Path("/cache")  # the platforms' local disk on a node (OpenI NPU, ModelArts)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Storage:
    """The local paths a run reads and writes, and the remote its outputs go to (if any)."""

    data: Path
    output: Path
    pretrained: Path | None = None
    tensorboard: Path | None = None
    remote: Remote | None = None
    uploads: Retry | None = None


def cache_root() -> Path:
    """$TRAIN_CACHE_DIR, else /cache where it can be written, else one in the temporary dir."""
    if named := os.environ.get("TRAIN_CACHE_DIR"):
        return Path(named)
    cache = PLATFORM_CACHE
    if os.access(cache, os.W_OK) or (not cache.exists() and os.access("/", os.W_OK)):
        return cache
    return Path(tempfile.gettempdir()) / "train-cache"


def local_output() -> Path:
    """Where a run whose train_url is an obs:// URL writes before uploading: $TRAIN_LOCAL_OUTPUT
    (a sweep's trial, each its own), else the cache's output/."""
    named = os.environ.get("TRAIN_LOCAL_OUTPUT")
    return Path(named) if named else cache_root() / "output"


def stage_timeout() -> float:
    """How long a process waits for its node's copier: TRAIN_STAGE_TIMEOUT, else 1800 s."""
    text = os.environ.get("TRAIN_STAGE_TIMEOUT", "")
    try:
        return float(text or 1800.0)
    except ValueError as err:
        raise ConfigError(f"TRAIN_STAGE_TIMEOUT must be seconds, not {text!r}") from err


def resolve(places: Places) -> Places:
    """``places`` with auto data_url/train_url made a detected platform's, else ./data, ./output."""
    if AUTO not in (places.data_url, places.train_url):
        return places
    marks = [name for name in MODELARTS_VARS if os.environ.get(name)]
    base = PLATFORM_CACHE if marks else DEFAULT_CONFIG.parent
    why = f"a ModelArts job ({marks[0]})" if marks else "no platform's directories here"
    data, output = base / "data", base / "output"
    if all(Path(name).is_dir() for name in OPENI_DIRS):  # OpenI's before ModelArts'
        data, output, why = *map(Path, OPENI_DIRS), "OpenI's /dataset and /model are here"
    data = data if places.data_url == AUTO else places.data_url
    output = output if places.train_url == AUTO else places.train_url
    log.info("data from %s, outputs to %s (auto: %s)", data, output, why)
    return replace(places, data_url=data, train_url=output)


def prepare(places: Places) -> Storage:
    """Bring data and pretrained weights onto this node once, and decide where outputs go."""
    uploads, downloads = Retry.read("UPLOAD"), Retry.read("DOWNLOAD")
    where = _c2net(places, downloads) if c2net.active() else _flags(resolve(places), downloads)
    return replace(where, uploads=uploads)


def outputs(places: Places) -> tuple[Path, Remote | None]:
    """Where outputs are written and uploaded, as prepare() decides, without fetching data."""
    if c2net.active():
        return _c2net_output(places, c2net.C2netEnv.read())
    output = resolve(places).train_url
    if obs.is_url(output):
        obs.require_moxing(f"train_url {output}")
        return local_output(), ObsRemote(str(output))
    return Path(output), None


def _flags(places: Places, downloads: Retry) -> Storage:
    data = places.data_url
    if obs.is_url(data):
        url = str(data)
        obs.require_moxing(f"data_url {url}")
        data = cache_root() / "data"
        Once(data.parent, "data", url).run(
            lambda: downloads.run(lambda: obs.copy(url, str(data)), "download"),
            f"copy {url} to {data}",
            stage_timeout(),
        )
    output, remote = outputs(places)
    return Storage(Path(data), output, places.pretrained, None, remote)


def _c2net_place(places: Places, flag: str, job: Path | None) -> Path | str:
    """A C2Net job's local place for ``flag``: the flag when given, else the job's variable."""
    place = getattr(places, flag) if flag in places.given or job is None else job
    if place == AUTO:  # a C2Net job without the variable: as anywhere else
        place = getattr(resolve(places), flag)
    if obs.is_url(place):
        raise ConfigError(
            "in a C2Net job give --data_url and --train_url as local paths (or leave them out "
            "and the job's LOCAL_DATASET_PATH and LOCAL_OUTPUT_PATH are used)"
        )
    return place


def _c2net_output(places: Places, env: c2net.C2netEnv) -> tuple[Path, Remote | None]:
    output = _c2net_place(places, "train_url", env.output)
    if output == env.output and c2net.package() is not None:
        return Path(output), C2netRemote(env.output_url)
    if output == env.output and env.method == "MOXING" and env.output_url:
        return Path(output), ObsRemote(env.output_url)
    return Path(output), None


def _c2net(places: Places, downloads: Retry) -> Storage:
    env = c2net.C2netEnv.read()
    key = json.dumps([os.environ.get(v) for v in ("DATASET_URL", "PRETRAIN_MODEL_URL")])
    Once(cache_root(), "c2net-prepare", key).run(
        lambda: downloads.run(lambda: c2net.prepare(env), "download"),
        "fetch the C2Net data",
        stage_timeout(),
    )
    data = _c2net_place(places, "data_url", env.dataset)
    output, remote = _c2net_output(places, env)
    return Storage(Path(data), output, places.pretrained or env.pretrained, env.tensorboard, remote)
