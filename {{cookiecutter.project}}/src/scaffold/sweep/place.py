"""Where a sweep writes, and how its outputs reach the platform: the place a run's own storage
decides (./output, OpenI's and C2Net's output directories, ModelArts' cache for an obs://
train_url), the sweep in its sweep/. With an obs:// train_url each trial is a run with its
own URL (<train_url>/sweep/<trial>), written in its local directory and uploaded as any run's
are; the sweep uploads its study and results after each trial and at the end. A C2Net job's
output directory goes up whole, as c2net copies it, after each trial and at the end."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from src.scaffold.config import Places
from src.scaffold.errors import StorageError
from src.scaffold.storage import obs
from src.scaffold.storage.retry import Retry
from src.scaffold.storage.uploads import Remote, Uploader
from src.scaffold.storage.where import outputs

log = logging.getLogger(__name__)
SWEEP = "sweep"  # the sweep's directory under the output directory


@dataclass
class Place:
    """The output directory on this node, the remote it goes to, and the obs:// train_url."""

    root: Path
    remote: Remote | None = None
    url: str | None = None
    own: tuple[str, ...] = ()  # the sweep's own files (study, results): put after each trial
    uploader: Uploader | None = field(default=None, repr=False)

    @property
    def sweep(self) -> Path:
        return self.root / SWEEP

    def trial(self, directory: Path) -> tuple[str, dict[str, str]]:
        """A trial's --train_url, and what its environment adds: with an obs:// train_url its
        own URL, written first in its directory here (TRAIN_LOCAL_OUTPUT)."""
        if self.url is None:
            return str(directory), {}
        name = directory.relative_to(self.root).as_posix()
        return f"{self.url.rstrip('/')}/{name}", {"TRAIN_LOCAL_OUTPUT": str(directory)}

    def fetch(self, names: tuple[str, ...]) -> None:
        """A sweep resumed on another node (a restarted job): its study from the remote."""
        if self.remote is None or all((self.sweep / name).exists() for name in names):
            return
        got = self.remote.get([f"{SWEEP}/{name}" for name in names], self.root)
        if got:
            log.info("the sweep's %s fetched from %s", ", ".join(got), self.remote.where)

    def upload(self, final: bool = False) -> None:
        """The sweep's files up, as a run's go: a failure is a warning until the last upload."""
        if self.remote is None:
            return
        if self.url is None:  # the trials do not upload themselves: everything, once a change
            self.uploader = self.uploader or Uploader(self.root, self.remote)
            self.uploader.sync(final)
            return
        names = [f"{SWEEP}/{name}" for name in self.own if (self.sweep / name).is_file()]
        remote = self.remote
        try:
            Retry.read("UPLOAD").run(lambda: remote.put(self.root, names), "upload")
        except StorageError as err:
            if final:
                raise
            log.warning("the sweep's upload failed, trying again after the next trial: %s", err)
            return
        if final:
            log.info("the sweep uploaded to %s/%s", self.remote.where, SWEEP)


def place(places: Places, own: tuple[str, ...]) -> Place:
    """The sweep's place for config.yaml's and the flags' data_url and train_url."""
    root, remote = outputs(places)
    url = str(places.train_url) if obs.is_url(places.train_url) else None
    return Place(Path(root).absolute(), remote, url, own)
