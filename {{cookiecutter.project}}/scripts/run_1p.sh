#!/usr/bin/env bash
# Train on one device. Run it from anywhere: it works in the project root.
set -euo pipefail

usage() {
    cat <<'USAGE'
usage: scripts/run_1p.sh [options] [-- TRAIN_ARGS...]

Train on one device with train.py; arguments after -- go to train.py as they are.

options:
  --data DIR        dataset directory (default: $DATA_DIR, else ./data)
  --output DIR      checkpoints and logs (default: $OUTPUT_DIR, else ./output)
  --device-id N     device index to train on (default: $DEVICE_ID, else 0)
  --dry-run         print the environment and the command, run nothing
  -h, --help        show this help

environment:
  PYTHON            interpreter to run train.py with (default: python3)

Relative paths are taken from the directory you run the script in; the
defaults are inside the project.

example:
  scripts/run_1p.sh --data /dataset --output /model -- --epoch_size 2
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"
python=${PYTHON:-python3}
default_paths
device_id=${DEVICE_ID:-0}
dry_run=false
train_args=()

while [[ $# -gt 0 ]]; do
    case $1 in
        --*=*)
            # --opt=value: split it and parse again as --opt value.
            set -- "${1%%=*}" "${1#*=}" "${@:2}"
            continue
            ;;
        --data | --output | --device-id)
            [[ $# -ge 2 && -n $2 && $2 != --* ]] || die_usage "$1 needs a value"
            case $1 in
                --data) data=$(absolute "$2") ;;
                --output) output=$(absolute "$2") ;;
                --device-id) device_id=$2 ;;
            esac
            shift 2
            ;;
        --dry-run) dry_run=true; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; train_args=("$@"); break ;;
        *) die_usage "unknown argument: $1" ;;
    esac
done

[[ $device_id =~ ^[0-9]+$ ]] || die_usage "--device-id must be a whole number, not '$device_id'"

cmd=("$python" train.py --data_url "$data" --train_url "$output" ${train_args[@]+"${train_args[@]}"})

if [[ $dry_run == true ]]; then
    # Printed as lines a shell can run, every word quoted.
    printf 'cd %q\n' "$project_root"
    printf '. ./env.sh\n'
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
mkdir -p "$output"
exec "${cmd[@]}"
