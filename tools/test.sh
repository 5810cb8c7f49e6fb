#!/usr/bin/env bash
# The test command: install everything the tests need, then run them all.
# Extra arguments go to pytest (e.g. tools/test.sh tests/unit -x).
# The Docker engine, the stand-in base image and the registry are started by the tests
# that need them (tools/docker_up.sh, tools/registry_up.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Programs the tests drive besides Python's: env.sh is sourced from zsh too; git serves and
# receives pushes; ip makes the two-host rehearsals' network namespaces; gawk and busybox are
# the awks besides Debian's mawk that scripts/failures.sh is run under.
# shellcheck source=tools/apt_need.sh
source tools/apt_need.sh
apt_need zsh:zsh git:git ip:iproute2 gawk:gawk busybox:busybox

bash tools/bootstrap.sh "train,mindspore,test,bench"
# Side by side, one worker a core (pytest-xdist); tests/conftest.py groups what must share a
# worker and orders the groups longest first (--no-loadscope-reorder keeps that order).
# PYTEST_WORKERS=0 runs them in one process.
exec .venv/bin/python -m pytest -ra --durations=10 -n "${PYTEST_WORKERS:-auto}" --dist loadgroup \
    --no-loadscope-reorder "$@"
