"""What the launch scripts ask about the network and the job, with nothing but Python.

    python3 scripts/cluster.py route HOST [OWN] [--wait S]
        the interface and address that reach HOST (the one holding address OWN, if any
        does), waiting up to S seconds for HOST to resolve (a pod's name resolves only
        once its pod is up)
    python3 scripts/cluster.py addresses         this host's IPv4 addresses, one a line
    python3 scripts/cluster.py wait-table FILE SECONDS
        wait until a rank table an operator writes (hccl.json) says "completed"
    python3 scripts/cluster.py cores N           N equal slices of this process's cores,
                                                 one taskset list (0-3,8) a line

Minimal images lack iproute2 (no `ip`), so the launchers ask here instead.
"""

import json
import os
import socket
import struct
import sys
import time

SIOCGIFADDR = 0x8915
POLL_S = 1.0
REPORT_EVERY_S = 15.0


def interface_addresses():
    """(interface, IPv4 address) for each interface that has one."""
    import fcntl  # Unix only, like the launchers

    found = []
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("256s", name[:15].encode())
            try:
                packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)
            except OSError:
                continue  # no IPv4 address on this interface
        found.append((name, socket.inet_ntoa(packed[20:24])))
    return found


def resolve(host, seconds=0.0):
    """``host``'s IPv4 address, asking again until ``seconds`` have passed (then the last
    lookup's OSError is raised); one line on stderr every REPORT_EVERY_S while waiting."""
    start = time.monotonic()
    reported = 0.0
    while True:
        try:
            return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
        except OSError:
            waited = time.monotonic() - start
            if waited >= seconds:
                raise
            if waited - reported >= REPORT_EVERY_S:
                print(
                    f"waiting for {host} to resolve ({waited:.0f} of {seconds:g} s)",
                    file=sys.stderr,
                )
                reported = waited
            time.sleep(min(POLL_S, seconds - waited))


def route(host, own=None, seconds=0.0):
    """The interface and source address this host uses to reach ``host``; the interface
    holding ``own`` if one does (a platform's word for the job's address: MA_CURRENT_IP).

    Connecting a UDP socket sends nothing: the kernel only picks the route.
    """
    try:
        target = resolve(host, seconds)
    except OSError as err:
        limit = f" within {seconds:g} s (--join-timeout)" if seconds else ""
        raise SystemExit(f"error: {host} did not resolve{limit}: {err}") from None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((target, 9))
        except OSError as err:
            raise SystemExit(f"error: no route to {host} ({target}): {err}") from None
        source = sock.getsockname()[0]
    held = {address: name for name, address in interface_addresses()}
    for address in (own, source):
        if address in held:
            return held[address], address
    raise SystemExit(f"error: no interface holds {source}, the address that reaches {host}")


def table_status(path, seconds):
    """The "status" of the rank table at ``path``, read again until it says "completed" or
    ``seconds`` have passed; one line on stderr every REPORT_EVERY_S while waiting."""
    start = time.monotonic()
    reported = 0.0
    status = "missing"
    while time.monotonic() - start < seconds:
        try:
            with open(path, encoding="utf-8") as stream:
                status = str(json.load(stream).get("status"))
        except (OSError, ValueError, AttributeError):
            status = "missing or not JSON yet"
        if status == "completed":
            return status
        waited = time.monotonic() - start
        if waited - reported >= REPORT_EVERY_S or not reported:
            print(
                f"waiting for {path}: status {status} ({waited:.0f} of {seconds:g} s)",
                file=sys.stderr,
            )
            reported = waited or 1e-9
        time.sleep(POLL_S)
    return status


def wait_table(path, seconds):
    """Wait for status "completed" (table_status); one line and exit 1 if it never comes."""
    status = table_status(path, seconds)
    if status != "completed":
        raise SystemExit(
            f"error: {path} still says {status} after {seconds:g} s: the operator did not "
            "place every pod in time (--join-timeout sets the wait)"
        )


def core_slices(count):
    """The CPUs this process may use, in ``count`` equal slices of consecutive ranges."""
    cpus = sorted(os.sched_getaffinity(0))
    width = len(cpus) // count
    if width < 1:
        raise SystemExit(f"error: {len(cpus)} cores for {count} ranks: nothing to bind")
    slices = []
    for i in range(count):
        ranges = []
        for cpu in cpus[i * width : (i + 1) * width]:
            if ranges and cpu == ranges[-1][1] + 1:
                ranges[-1][1] = cpu
            else:
                ranges.append([cpu, cpu])
        slices.append(",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges))
    return slices


def main(argv):
    wait = argv[argv.index("--wait") :][:2] if "--wait" in argv else []
    argv = [arg for arg in argv if arg not in wait]
    if argv[:1] == ["route"] and len(argv) in (2, 3) and len(wait) in (0, 2):
        print(*route(*argv[1:], seconds=float(wait[1]) if wait else 0.0))
    elif argv == ["addresses"]:
        print("\n".join(address for _, address in interface_addresses()))
    elif argv[:1] == ["cores"] and len(argv) == 2:
        print("\n".join(core_slices(int(argv[1]))))
    elif argv[:1] == ["wait-table"] and len(argv) == 3:
        wait_table(argv[1], float(argv[2]))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
