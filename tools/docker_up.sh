#!/usr/bin/env bash
# Make a Docker engine answer on /var/run/docker.sock and build the stand-in base image.
# Nothing can be pulled on this kind of host, so the base image is made locally with
# debootstrap (Debian 12, Python 3.11) and imported; it stays cached in the engine.
# Usage: tools/docker_up.sh   (as root; idempotent, safe to run before every test run)
set -euo pipefail

image="${STANDIN_BASE:-train-template/standin-base:bookworm-py311}"
log="${DOCKERD_LOG:-/var/log/train-template-dockerd.log}"

# shellcheck source=tools/apt_need.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt_need.sh"
apt_need dockerd:docker.io debootstrap:debootstrap

if ! docker info >/dev/null 2>&1; then
    echo "starting dockerd (log: $log)" >&2
    # No bridge and no iptables: containers use network none (or host for a build step).
    nohup dockerd --bridge=none --iptables=false >"$log" 2>&1 &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { echo "error: dockerd did not answer within 60 s; see $log" >&2; exit 1; }
fi

if ! docker image inspect "$image" >/dev/null 2>&1; then
    mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)"
    mirror="${mirror:-http://deb.debian.org/debian}"
    rootfs="$(mktemp -d)"
    trap 'rm -rf "$rootfs"' EXIT
    echo "building $image with debootstrap from $mirror (about a minute)" >&2
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,libgomp1,ca-certificates \
        bookworm "$rootfs" "$mirror" >/dev/null
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
fi
echo "docker ready; stand-in base image: $image"
