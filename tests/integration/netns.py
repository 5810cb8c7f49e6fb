"""Two hosts on one machine: network namespaces joined by a veth pair, each with its own
address in 10.250.N.0/24 (nothing else is ever dialled), deleted afterwards with the host
names they were given (/etc/netns/<namespace>)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.template.launchers import env


@dataclass(frozen=True)
class Hosts:
    """Two namespaces, node 0 at ``addresses[0]`` and node 1 at ``addresses[1]``."""

    names: tuple[str, str]
    addresses: tuple[str, str]

    def name(self, names: tuple[str, str], addresses: tuple[str, str] | None = None) -> None:
        """Host names both namespaces resolve, as a job's DNS would: ``names[N]`` is node N's
        address (or ``addresses[N]``). ``ip netns exec`` mounts /etc/netns/<namespace>/hosts
        on /etc/hosts."""
        pairs = zip(addresses or self.addresses, names, strict=True)
        lines = "".join(f"{address} {name}\n" for address, name in pairs)
        for namespace in self.names:
            etc = Path("/etc/netns") / namespace
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text("127.0.0.1 localhost\n" + lines)

    def start(
        self, node: int, command: list[str], hostname: str | None, **variables: str
    ) -> subprocess.Popen[str]:
        """COMMAND in node's namespace (with its own hostname, in a UTS namespace, if given)."""
        prefix = ["ip", "netns", "exec", self.names[node]]
        if hostname:
            script = 'hostname "$0" && exec "$@"'
            prefix += ["unshare", "--uts", "sh", "-c", script, hostname]
        return subprocess.Popen(
            [*prefix, *command],
            env=env(**variables),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def two_hosts() -> Iterator[Hosts]:
    assert os.geteuid() == 0, "the two-node tests create network namespaces: run them as root"
    tag = f"tt{os.getpid() % 10000}"
    subnet = 10 + os.getpid() % 240
    names = (f"{tag}a", f"{tag}b")
    addresses = (f"10.250.{subnet}.1", f"10.250.{subnet}.2")
    try:
        for name in names:
            _ip("netns", "add", name)
        _ip("link", "add", f"{tag}-0", "type", "veth", "peer", "name", f"{tag}-1")
        for i, name in enumerate(names):
            _ip("link", "set", f"{tag}-{i}", "netns", name)
            _ip("-n", name, "addr", "add", f"{addresses[i]}/24", "dev", f"{tag}-{i}")
            _ip("-n", name, "link", "set", f"{tag}-{i}", "up")
            _ip("-n", name, "link", "set", "lo", "up")
        yield Hosts(names, addresses)
    finally:
        for name in names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / name, ignore_errors=True)


def finish(procs: list[subprocess.Popen[str]], timeout: float) -> list[tuple[int, str, str]]:
    """(exit status, stdout, stderr) of each process, once all have ended."""
    return [(p.wait(timeout), *p.communicate()) for p in procs]
