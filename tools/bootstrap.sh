#!/usr/bin/env bash
# Create .venv (if needed) and install train-template with the extras asked for.
# Usage: tools/bootstrap.sh [EXTRAS]   e.g. "train" (default) or "train,test"
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-train}"
python="${PYTHON:-python3}"

# A .venv left half made (an interrupted first run has no pip yet) is made again.
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    "$python" -m venv --clear .venv
fi
# Quiet but not silent: a failed install still prints why.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${extras}]"
