#!/usr/bin/env bash
# A sweep (README: Tune it) as a job's command: sweep.py on this node's devices, continuing
# the sweep its output holds. scripts/run_8p.sh --sweep starts it with the job's shape, which
# is only checked: a sweep's trials share one node.
set -euo pipefail

usage() {
    cat <<'USAGE'
usage: scripts/run_8p.sh --sweep [--cluster KIND] [options] [-- TRAIN_ARGS...]

Run sweep.py's trials on this node's devices, divided between --parallel trials, and
continue the sweep the output holds: a job restarted on a fault goes on where it
stopped. A sweep runs on one node; a job of several is refused. Arguments after --
go to every trial's train.py.

options:
  --trials N          trials in all (default: sweep.yaml's)
  --parallel K        trials side by side (default: 1)
  --ranks N           processes a trial on a node without accelerators (default: 1)
  --sweep-config F    the search space (default: the project's sweep.yaml)
  --data DIR          dataset directory (default: $DATA_DIR, else train.py's data_url)
  --output DIR        where sweep/ goes (default: $OUTPUT_DIR, else train.py's train_url)
  --dry-run           print the command, run nothing

example:
  scripts/run_8p.sh --sweep --parallel 4 --output /output -- --epoch_size 3
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"
job_defaults 29500
# One node unless the job says more; the job's other options (a rank table, msrun's workers)
# say its shape and are not the sweep's.
nnodes=${NNODES:-1} trials='' parallel='' ranks='' sweep_config='' worker_num=''
value_options="$job_options --trials --parallel --ranks --sweep-config --worker-num --rank-table --chip --log-by"
flag_options="--dry-run --wait-table --bind-cores"
parse_options "$@"
for count in trials parallel ranks; do
    [[ -z ${!count} ]] || is_count "${!count}" || die_usage "--$count must be a whole number from 1, not '${!count}'"
done
nodes=$nnodes
if [[ -n $worker_num ]] && is_count "$worker_num" && is_count "$nproc"; then nodes=$((worker_num / nproc)); fi
[[ $nodes == 1 ]] || die "--sweep: this job has $nodes nodes, and a sweep runs its trials on one node's devices: make it a job of one node (gen job render --sweep does)"

# A platform's arguments (ModelArts appends --train_url=obs://..., and its hyperparameters)
# that are the sweep's own go to sweep.py; the rest to every trial.
own=() every=()
set -- ${train_args[@]+"${train_args[@]}"}
while [[ $# -gt 0 ]]; do
    case ${1%%=*} in
        --train_url | --trials | --parallel | --ranks | --sweep_config | --resume)
            if [[ $1 == *=* || $# -lt 2 ]]; then own+=("$1") && shift; else own+=("$1" "$2") && shift 2; fi
            ;;
        *) every+=("$1") && shift ;;
    esac
done
data=$(absolute "$data") output=$(absolute "$output")
cmd=("$python" sweep.py --resume auto)
[[ -z $trials ]] || cmd+=(--trials "$trials")
[[ -z $parallel ]] || cmd+=(--parallel "$parallel")
[[ -z $ranks ]] || cmd+=(--ranks "$ranks")
[[ -z $sweep_config ]] || cmd+=(--sweep_config "$(absolute "$sweep_config")")
[[ -z $output ]] || cmd+=(--train_url "$output")
cmd+=(${own[@]+"${own[@]}"} --)
[[ -z $data ]] || cmd+=(--data_url "$data")
cmd+=(${every[@]+"${every[@]}"})

if [[ $dry_run == true ]]; then
    printf 'cd %q\n. ./env.sh\n' "$project_root"
    print_words "${cmd[@]}"
    exit 0
fi
cd "$project_root"
# shellcheck source=/dev/null  # env.sh is linted on its own
. ./env.sh
exec "${cmd[@]}"
