#!/usr/bin/env bash
# The main job: install, generate a PyTorch project and train it on one CPU
# with the small real dataset every generated project ships.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/bootstrap.sh train
root="$PWD"
mkdir -p demo
# The quickstart's run goes into output/quickstart: ./output stays free for the run that
# `gen new`'s next: line starts.
output=output/quickstart
if [ ! -d demo/mnist-lenet ]; then
    .venv/bin/gen new mnist-lenet --no-input --output-dir demo
else
    # A new run never writes into another run's output directory: this one gets its own.
    output=output/quickstart-$(date -u +%Y%m%d-%H%M%S)
    echo "demo/mnist-lenet exists: training it again into demo/mnist-lenet/$output"
fi
cd demo/mnist-lenet
PYTHON="$root/.venv/bin/python" bash scripts/run_1p.sh --output "$output"
echo "done: checkpoints, TensorBoard files and the run record in demo/mnist-lenet/$output"
# The environment each framework's projects need (README: "Which environment a project needs").
echo "this .venv trains PyTorch projects; for MindSpore ones (MindSpore and numpy<2):" \
    "bash tools/bootstrap.sh train,mindspore"
