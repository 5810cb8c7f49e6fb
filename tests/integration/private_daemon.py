"""A second, private dockerd for the tests that stop an engine: its own socket, data root,
exec root and pid file, so the shared engine is never touched. The stand-in base is
loaded into it once; stopping it is SIGTERM to the daemon this module started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path


class PrivateDaemon:
    """``dockerd`` on a socket of its own; ``start`` and ``stop`` as often as a test needs."""

    def __init__(self, extra_args: tuple[str, ...] = (), data_size: str | None = None) -> None:
        """``data_size`` (say ``"64g"``) puts the data root on a tmpfs of that size, so what
        the daemon reports free does not depend on this machine's disk (tmpfs takes memory
        only for what is written into it)."""
        # Short: containerd's socket lives under the exec root (unix paths max 108 bytes).
        self.root = Path(tempfile.mkdtemp(prefix="gtd-", dir="/tmp"))
        self.extra_args = extra_args
        if data_size is not None:
            data = self.root / "data"
            data.mkdir()
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={data_size}", "tmpfs", str(data)],
                check=True,
                capture_output=True,
            )
        self.socket = self.root / "docker.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.host}

    def docker(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess:
        """The docker CLI against this daemon."""
        return subprocess.run(
            ["docker", "-H", self.host, *args], check=True, capture_output=True, **kwargs
        )

    def start(self) -> PrivateDaemon:
        if self.running:
            return self
        with (self.root / "dockerd.log").open("ab") as log:
            self.process = subprocess.Popen(
                [
                    "dockerd",
                    "--bridge=none",
                    "--iptables=false",
                    "-H",
                    self.host,
                    "--data-root",
                    str(self.root / "data"),
                    "--exec-root",
                    str(self.root / "exec"),
                    "--pidfile",
                    str(self.root / "dockerd.pid"),
                    *self.extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"private dockerd exited: {self.log_tail()}")
            ready = subprocess.run(["docker", "-H", self.host, "version"], capture_output=True)
            if ready.returncode == 0:
                return self
            time.sleep(0.5)
        raise RuntimeError(f"private dockerd did not answer in 60 s: {self.log_tail()}")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 60) -> None:
        """SIGTERM to the daemon (it stops its containers and its containerd), then wait;
        SIGKILL to its process group only if it does not exit."""
        if not self.running:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def load(self, image: str) -> None:
        """Copy ``image`` from the shared engine into this one (docker save | docker load)."""
        saved = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        assert saved.stdout is not None
        self.docker("load", "-q", stdin=saved.stdout)
        assert saved.wait() == 0

    def log_tail(self) -> str:
        path = self.root / "dockerd.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def destroy(self) -> None:
        """Stop the daemon and remove everything it kept."""
        self.stop()
        # Layers and namespaces are mounted while containers run; after a clean stop none
        # is, but an unclean one must not let rmtree reach into a mount.
        mounts = Path("/proc/mounts").read_text().splitlines()
        inside = [m.split()[1] for m in mounts if m.split()[1].startswith(f"{self.root}/")]
        for mount in sorted(inside, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
