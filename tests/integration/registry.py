"""A real image registry on 127.0.0.1 for the image push tests: Debian's docker-registry
(the distribution registry) with htpasswd (bcrypt) auth, its storage in a test folder."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import bcrypt

from tests.integration.gitservers import free_port, wait_for_port

CONFIG = """\
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {root}/storage
http:
  addr: 127.0.0.1:{port}
  secret: one-registry-no-load-balancer
auth:
  htpasswd:
    realm: train-template-tests
    path: {root}/htpasswd
"""


class LocalRegistry:
    """``docker-registry serve`` on a free loopback port; one user, refused otherwise."""

    def __init__(self, binary: str, root: Path, user: str, password: str) -> None:
        self.binary, self.root, self.user, self.password = binary, root, user, password
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def login(self) -> dict[str, str]:
        return {"GEN_REGISTRY_USER": self.user, "GEN_REGISTRY_PASSWORD": self.password}

    def start(self) -> LocalRegistry:
        self.root.mkdir(parents=True, exist_ok=True)
        hashed = bcrypt.hashpw(self.password.encode(), bcrypt.gensalt(rounds=5)).decode()
        (self.root / "htpasswd").write_text(f"{self.user}:{hashed}\n")
        config = self.root / "config.yml"
        config.write_text(CONFIG.format(root=self.root, port=self.port))
        with (self.root / "registry.log").open("wb") as log:
            self.process = subprocess.Popen(
                [self.binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        wait_for_port(self.port, timeout_s=30)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        # Pushed layers are large: the storage does not wait for pytest's tmp cleanup.
        shutil.rmtree(self.root / "storage", ignore_errors=True)
