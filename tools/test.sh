#!/usr/bin/env bash
# The test command: install everything the tests need, then run them all.
# Extra arguments go to pytest (e.g. tools/test.sh tests/unit -x).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/bootstrap.sh "train,mindspore,test,bench"
exec .venv/bin/python -m pytest -ra "$@"
