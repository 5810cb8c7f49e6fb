#!/usr/bin/env bash
# Train on one device. Run it from anywhere: it works in the project root.
set -euo pipefail

usage() {
    cat <<'USAGE'
usage: scripts/run_1p.sh [options] [-- TRAIN_ARGS...]

Train on one device with train.py; arguments after -- go to train.py as they are.
With --entry, evaluate, predict or export instead, on the run in --output.

options:
  --entry SCRIPT    train.py (default), eval.py, predict.py or export.py
  --data DIR        dataset directory (default: $DATA_DIR, else train.py's data_url)
  --output DIR      checkpoints and logs (default: $OUTPUT_DIR, else train.py's train_url)
  --device-id N     device index to train on (default: $DEVICE_ID, else 0)
  --dry-run         print the environment and the command, run nothing
  -h, --help        show this help

environment:
  PYTHON            interpreter to run train.py with (default: python3)

Relative paths are taken from the directory you run the script in; the
defaults are inside the project.

example:
  scripts/run_1p.sh --data /dataset --output /model -- --epoch_size 2
  scripts/run_1p.sh --entry predict.py --output /model -- samples/
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"
python=${PYTHON:-python3}
data=${DATA_DIR:-} output=${OUTPUT_DIR:-}
device_id=${DEVICE_ID:-0} dry_run=false entry=train.py
train_args=()
value_options="--entry --data --output --device-id"
flag_options="--dry-run"
parse_options "$@"
is_index "$device_id" || die_usage "--device-id must be a whole number, not '$device_id'"
case $entry in
    train.py | eval.py | predict.py | export.py) ;;
    *) die_usage "--entry must be train.py, eval.py, predict.py or export.py, not '$entry'" ;;
esac
data=$(absolute "$data") output=$(absolute "$output")
# Without --data or --output, the script's own data_url and train_url (auto: the platform's,
# else ./data and ./output; the run's recorded data), never paths chosen here.
data_args=() && [[ -z $data ]] || data_args=(--data_url "$data")
output_args=() && [[ -z $output ]] || output_args=(--train_url "$output")
cmd=("$python" "$entry" ${data_args[@]+"${data_args[@]}"} ${output_args[@]+"${output_args[@]}"} ${train_args[@]+"${train_args[@]}"})

if [[ $dry_run == true ]]; then
    # Printed as lines a shell can run, every word quoted.
    printf 'cd %q\n. ./env.sh\n' "$project_root"
    printf 'export DEVICE_ID=%q RANK_ID=0 RANK_SIZE=1\n' "$device_id"
    printf 'unset RANK LOCAL_RANK WORLD_SIZE\n'
    print_words "${cmd[@]}"
    exit 0
fi

cd "$project_root"
# shellcheck source=/dev/null  # env.sh is linted on its own
. ./env.sh
# One process, no process group: a WORLD_SIZE inherited from a platform
# must not make train.py wait for peers that never come.
export DEVICE_ID=$device_id RANK_ID=0 RANK_SIZE=1
unset RANK LOCAL_RANK WORLD_SIZE
exec "${cmd[@]}"
