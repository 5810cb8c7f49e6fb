#!/usr/bin/env bash
# Make Debian's distribution registry (package docker-registry) available for the image push
# tests, which start it themselves on 127.0.0.1 with their own config. Only installs: the
# package's service is kept from starting (it would listen on every address).
# Usage: tools/registry_up.sh   (as root; idempotent); prints the binary's path.
set -euo pipefail

if ! command -v docker-registry >/dev/null 2>&1; then
    echo "installing docker-registry" >&2
    policy=/usr/sbin/policy-rc.d
    made_policy=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        made_policy=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
    [ -n "$made_policy" ] && rm -f "$policy"
fi
command -v docker-registry
