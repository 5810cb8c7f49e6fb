#!/usr/bin/env bash
# The aarch64 stand-in base image, built on this x86_64 host by emulation, and the emulator.
# Ascend servers run aarch64 CPUs: the suite builds and smoke-tests one project image for
# them here. qemu-user-static and binfmt-support register qemu-aarch64 with binfmt_misc
# (flag F: the interpreter works inside containers); debootstrap --arch=arm64 then unpacks
# and configures a Debian 12 root under emulation (a few minutes, once: the root and the
# image are kept), loaded with its real architecture (tools/load_rootfs.py).
# Usage: tools/standin_arm64.sh   (as root, after tools/docker_up.sh; idempotent)
set -euo pipefail

image="${STANDIN_ARM64:-train-template/standin-base:bookworm-py311-arm64}"
cache="${TRAIN_TEMPLATE_CACHE:-/var/tmp/train-template-cache}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# shellcheck source=tools/apt_need.sh
source "$here/apt_need.sh"
qemu=/usr/bin/qemu-aarch64-static
[[ -e /usr/libexec/qemu-binfmt/aarch64-binfmt-P ]] && qemu=/usr/libexec/qemu-binfmt/aarch64-binfmt-P
apt_need "$qemu:qemu-user-static" update-binfmts:binfmt-support debootstrap:debootstrap
if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    update-binfmts --enable qemu-aarch64 >/dev/null
fi
grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64 || echo 1 > /proc/sys/fs/binfmt_misc/qemu-aarch64

if ! docker image inspect "$image" >/dev/null 2>&1; then
    root="$cache/rootfs-bookworm-arm64"
    if [ ! -e "$root.complete" ]; then
        mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)"
        mirror="${mirror:-http://deb.debian.org/debian}"
        echo "building the aarch64 root with debootstrap under emulation (a few minutes)" >&2
        rm -rf "$root" && mkdir -p "$root"
        debootstrap --arch=arm64 --variant=minbase \
            --include=python3,python3-pip,python3-venv,libgomp1,ca-certificates \
            bookworm "$root" "$mirror" >/dev/null
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
        touch "$root.complete"
    fi
    python3 "$here/load_rootfs.py" "$root" "$image" arm64
fi
echo "aarch64 stand-in base image: $image"
