#!/usr/bin/env bash
# The main job: install, generate a PyTorch project and train it on one CPU
# with the small real dataset every generated project ships.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/bootstrap.sh train
root="$PWD"
mkdir -p demo
if [ ! -d demo/mnist-lenet ]; then
    .venv/bin/gen new mnist-lenet --no-input --output-dir demo
else
    echo "demo/mnist-lenet exists: training it again"
fi
cd demo/mnist-lenet
PYTHON="$root/.venv/bin/python" bash scripts/run_1p.sh
echo "done: checkpoints and run record in demo/mnist-lenet/output"
