"""Where a run reads and writes on this node, on every platform, and where outputs go back.

Chosen by what the job's environment holds; flags given on the command line win:
* OpenI C2Net jobs: the C2Net variables (src/scaffold/c2net.py), with or without the
  c2net package;
* OpenI NPU and ModelArts jobs: obs:// URLs as --data_url and --train_url. The
  dataset is copied to <cache>/data once per node, outputs are written to
  <cache>/output and uploaded to --train_url (src/scaffold/storage/uploads.py);
* anything else: local directories, used as they are.
The cache is /cache unless TRAIN_CACHE_DIR says otherwise; a process waiting for
its node's copier gives up after TRAIN_STAGE_TIMEOUT seconds (default 1800). A failed
download or upload is retried as src/scaffold/storage/retry.py says.
"""

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

# OpenI's GPU jobs (cloudbrain one) mount the dataset and collect the outputs here.
OPENI_DIRS = ("/dataset", "/model")
# ModelArts' training containers set these; its jobs copy data to the node's cache.
MODELARTS_VARS = ("MA_CURRENT_IP", "MA_JOB_DIR", "MA_CURRENT_HOST_IP")
# The platforms' local disk on a node (OpenI NPU, ModelArts).
PLATFORM_CACHE = Path("/cache")
CACHE_ENV = "TRAIN_CACHE_DIR"
TIMEOUT_ENV = "TRAIN_STAGE_TIMEOUT"
DEFAULT_TIMEOUT_S = 1800.0
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
    """$TRAIN_CACHE_DIR, else /cache (the platforms' local disk) where it can be written,
    else a directory under the system's temporary directory."""
    named = os.environ.get(CACHE_ENV)
    if named:
        return Path(named)
    default = PLATFORM_CACHE
    if os.access(default, os.W_OK) or (not default.exists() and os.access("/", os.W_OK)):
        return default
    return Path(tempfile.gettempdir()) / "train-cache"


def stage_timeout() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError as err:
        raise ConfigError(
            f"{TIMEOUT_ENV} must be seconds, not {os.environ[TIMEOUT_ENV]!r}"
        ) from err


def platform_defaults() -> tuple[Path, Path, str]:
    """Where data_url and train_url auto point, and why: a platform's own directories where
    its job is detected, else the project's ./data and ./output (a run off the platform
    never writes outside the project unless asked)."""
    if all(Path(name).is_dir() for name in OPENI_DIRS):
        return Path(OPENI_DIRS[0]), Path(OPENI_DIRS[1]), "OpenI's /dataset and /model are here"
    marks = [name for name in MODELARTS_VARS if os.environ.get(name)]
    if marks:
        return PLATFORM_CACHE / "data", PLATFORM_CACHE / "output", f"a ModelArts job ({marks[0]})"
    project = DEFAULT_CONFIG.parent
    return project / "data", project / "output", "no platform's directories here"


def resolve(places: Places) -> Places:
    """``places`` with data_url and train_url auto made places (platform_defaults), said in
    a line."""
    if AUTO not in (places.data_url, places.train_url):
        return places
    data, output, why = platform_defaults()
    data = data if places.data_url == AUTO else places.data_url
    output = output if places.train_url == AUTO else places.train_url
    log.info("data from %s, outputs to %s (auto: %s)", data, output, why)
    return replace(places, data_url=data, train_url=output)


def prepare(places: Places) -> Storage:
    """Bring the dataset (and pretrained weights) onto this node, once per node, and decide
    where outputs are written and uploaded."""
    # Both read first: a bad retry setting stops the run before any copy.
    uploads, downloads = Retry.read("UPLOAD"), Retry.read("DOWNLOAD")
    active = c2net.active()
    where = _c2net(places, downloads) if active else _flags(resolve(places), downloads)
    return replace(where, uploads=uploads)


def outputs(places: Places) -> tuple[Path, Remote | None]:
    """Where a run's outputs are on this node, and the remote they go to: what prepare()
    decides for them, without fetching any data (a resumed run reads its record first)."""
    if c2net.active():
        return _c2net_output(places, c2net.C2netEnv.read())
    output = resolve(places).train_url
    if obs.is_url(output):
        obs.require_moxing(f"train_url {output}")
        return cache_root() / "output", ObsRemote(str(output))
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


def _c2net_output(places: Places, env: c2net.C2netEnv) -> tuple[Path, Remote | None]:
    given = "train_url" in places.given or env.output is None
    output = places.train_url if given else env.output
    if output == AUTO:
        output = resolve(replace(places, train_url=output)).train_url
    if obs.is_url(output):
        raise ConfigError(_C2NET_LOCAL)
    remote: Remote | None = None
    if output == env.output:
        if c2net.package() is not None:
            remote = C2netRemote(env.output_url)
        elif env.method == "MOXING" and env.output_url:
            remote = ObsRemote(env.output_url)
    return Path(output), remote


_C2NET_LOCAL = (
    "in a C2Net job give --data_url and --train_url as local paths (or leave them out "
    "and the job's LOCAL_DATASET_PATH and LOCAL_OUTPUT_PATH are used)"
)


def _c2net(places: Places, downloads: Retry) -> Storage:
    env = c2net.C2netEnv.read()
    # What the job asks for: c2net's own cache files say when it was fetched already.
    key = json.dumps([os.environ.get(v) for v in ("DATASET_URL", "PRETRAIN_MODEL_URL")])
    marks = cache_root()
    Once(marks, "c2net-prepare", key).run(
        lambda: downloads.run(lambda: c2net.prepare(env), "download"),
        "fetch the C2Net data",
        stage_timeout(),
    )
    given = "data_url" in places.given or env.dataset is None
    data = places.data_url if given else env.dataset
    if data == AUTO:
        # A C2Net job without the variable: as anywhere else.
        data = resolve(replace(places, data_url=data)).data_url
    if obs.is_url(data):
        raise ConfigError(_C2NET_LOCAL)
    output, remote = _c2net_output(places, env)
    pretrained = places.pretrained or env.pretrained
    return Storage(Path(data), output, pretrained, env.tensorboard, remote)
