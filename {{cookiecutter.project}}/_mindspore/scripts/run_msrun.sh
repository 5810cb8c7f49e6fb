#!/usr/bin/env bash
# Train with MindSpore's msrun on this node, one of one or several: msrun starts
# the scheduler (on the master node) and this node's workers, and stops them all
# when one fails. Run it from anywhere: it works in the project root.
set -euo pipefail

# The defaults chosen when the project was generated.
default_devices={{ cookiecutter.devices_per_node | shell_quote }}
default_nodes={{ cookiecutter.nnodes | shell_quote }}

usage() {
    cat <<USAGE
usage: scripts/run_msrun.sh [options] [-- TRAIN_ARGS...]

Start train.py under msrun (MindSpore 2.3 or later); arguments after -- go to
every train.py as they are. Run it on every node of the job.

options:
  --worker-num N        workers in the whole job (default: LOCAL x \$NNODES, else LOCAL x $default_nodes)
  --local-worker-num N  workers on this node, LOCAL (default: \$NPROC_PER_NODE, else $default_devices)
  --node-rank N         this node's index; its workers are ranks N x LOCAL on (default: \$NODE_RANK, else 0)
  --master-addr HOST    address of the node that runs the scheduler (default: \$MASTER_ADDR, else 127.0.0.1)
  --master-port PORT    free TCP port there, 1024-65535 (default: \$MASTER_PORT, else 8118)
  --join true|false     wait for the workers and fail when one fails (default: true);
                        false returns once they have started
  --data DIR            dataset directory (default: \$DATA_DIR, else ./data)
  --output DIR          checkpoints (default: \$OUTPUT_DIR, else ./output)
  --log-dir DIR         scheduler.log and worker_N.log (default: \$LOG_DIR, else OUTPUT/logs)
  --dry-run             print the msrun command and what each worker gets, run nothing
  -h, --help            show this help

environment:
  PYTHON                interpreter to run msrun and train.py with (default: python3)

msrun gives each worker RANK_ID, DEVICE_ID (its index on this node),
RANK_SIZE and the dynamic-cluster variables MS_ROLE, MS_WORKER_NUM,
MS_SCHED_HOST, MS_SCHED_PORT and MS_NODE_ID. The node whose address is
--master-addr also runs the scheduler: train.py once more, as MS_SCHED.
Relative paths are taken from the directory you run the script in; the
defaults are inside the project.

example, two nodes of 8 devices:
  node 0: scripts/run_msrun.sh --worker-num 16 --node-rank 0 --master-addr 10.0.0.1
  node 1: scripts/run_msrun.sh --worker-num 16 --node-rank 1 --master-addr 10.0.0.1
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"

# msrun as a file: its console script next to the interpreter (a venv's or
# conda's bin, or the user scheme's), else the first on PATH. It is run with
# "$python", so that a script whose #! names another interpreter still
# imports this interpreter's MindSpore.
find_msrun() {
    local dirs dir
    dirs=$("$python" -c 'import os, sysconfig
print(sysconfig.get_path("scripts"))
print(sysconfig.get_path("scripts", os.name + "_user"))' 2>/dev/null) || dirs=
    while IFS= read -r dir; do
        if [[ -n $dir && -f $dir/msrun ]]; then
            printf '%s' "$dir/msrun"
            return 0
        fi
    done <<<"$dirs"
    command -v msrun
}

# msrun starts every process as `python train.py` from PATH, whatever
# interpreter runs msrun: a directory whose `python` runs "$python" goes first.
write_python_shim() {
    local target
    target=$(command -v "$python") || die "PYTHON=$python: no such interpreter"
    target=$(absolute "$target")
    mkdir -p "$shim_dir"
    printf '#!/bin/sh\nexec %q "$@"\n' "$target" >"$shim_dir/python.$$"
    chmod +x "$shim_dir/python.$$"
    mv -f "$shim_dir/python.$$" "$shim_dir/python"
}

# msrun stops its workers on SIGINT only, and exits 0 then: pass a signal on
# as SIGINT (again every second: msrun ignores it until its workers run), and
# exit with the signal's status.
on_signal() {
    local waited
    if [[ $BASHPID != "$$" ]]; then exit "$1"; fi
    echo "run_msrun.sh: $2; stopping msrun and its workers" >&2
    for ((waited = 0; waited < 150; waited++)); do
        kill -0 "$msrun_pid" 2>/dev/null || break
        if [[ $((waited % 5)) -eq 0 ]]; then kill -INT "$msrun_pid" 2>/dev/null || true; fi
        sleep 0.2
    done
    kill -KILL "$msrun_pid" 2>/dev/null || true
    wait "$msrun_pid" 2>/dev/null || true
    exit "$1"
}

python=${PYTHON:-python3}
local_workers=${NPROC_PER_NODE:-$default_devices}
nnodes=${NNODES:-$default_nodes}
workers=
node_rank=${NODE_RANK:-0}
master_addr=${MASTER_ADDR:-127.0.0.1}
master_port=${MASTER_PORT:-8118}
join=true
default_paths
log_dir=${LOG_DIR:+$(absolute "$LOG_DIR")}
dry_run=false
train_args=()

while [[ $# -gt 0 ]]; do
    case $1 in
        --*=*)
            # --opt=value: split it and parse again as --opt value.
            set -- "${1%%=*}" "${1#*=}" "${@:2}"
            continue
            ;;
        --worker-num | --local-worker-num | --node-rank | --master-addr | --master-port | --join | --data | --output | --log-dir)
            [[ $# -ge 2 && -n $2 && $2 != --* ]] || die_usage "$1 needs a value"
            case $1 in
                --worker-num) workers=$2 ;;
                --local-worker-num) local_workers=$2 ;;
                --node-rank) node_rank=$2 ;;
                --master-addr) master_addr=$2 ;;
                --master-port) master_port=$2 ;;
                --join) join=$2 ;;
                --data) data=$(absolute "$2") ;;
                --output) output=$(absolute "$2") ;;
                --log-dir) log_dir=$(absolute "$2") ;;
            esac
            shift 2
            ;;
        --dry-run) dry_run=true; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; train_args=("$@"); break ;;
        *) die_usage "unknown argument: $1" ;;
    esac
done

is_count "$local_workers" || die_usage "--local-worker-num must be a whole number from 1, not '$local_workers'"
is_count "$nnodes" || die_usage "NNODES must be a whole number from 1, not '$nnodes'"
workers=${workers:-$((local_workers * nnodes))}
is_count "$workers" || die_usage "--worker-num must be a whole number from 1, not '$workers'"
is_index "$node_rank" || die_usage "--node-rank must be a whole number from 0, not '$node_rank'"
# msrun numbers this node's workers from node-rank x local-worker-num.
first_rank=$((node_rank * local_workers))
if [[ $((first_rank + local_workers)) -gt $workers ]]; then
    die_usage "--node-rank $node_rank with --local-worker-num $local_workers needs ranks up to $((first_rank + local_workers - 1)), but --worker-num is $workers"
fi
if ! is_count "$master_port" || [[ $master_port -lt 1024 || $master_port -gt 65535 ]]; then
    die_usage "--master-port must be a TCP port from 1024 to 65535, not '$master_port'"
fi
case $join in
    true | True) join=True ;;
    false | False) join=False ;;
    *) die_usage "--join must be true or false, not '$join'" ;;
esac
log_dir=${log_dir:-$output/logs}
shim_dir=$log_dir/.msrun_python
msrun=$(find_msrun) || msrun=
msrun_args=(--worker_num "$workers" --local_worker_num "$local_workers" --node_rank "$node_rank"
    --master_addr "$master_addr" --master_port "$master_port" --log_dir "$log_dir" --join "$join"
    train.py --data_url "$data" --train_url "$output" ${train_args[@]+"${train_args[@]}"})

if [[ $dry_run == true ]]; then
    printf '# msrun: %s workers on node %s (ranks %s-%s) of %s in all; scheduler at %s:%s; logs under %s\n' \
        "$local_workers" "$node_rank" "$first_rank" "$((first_rank + local_workers - 1))" \
        "$workers" "$master_addr" "$master_port" "$log_dir"
    for ((local_rank = 0; local_rank < local_workers; local_rank++)); do
        printf '# rank %s: RANK_ID=%s DEVICE_ID=%s RANK_SIZE=%s MS_ROLE=MS_WORKER (set by msrun), log %q\n' \
            "$((first_rank + local_rank))" "$((first_rank + local_rank))" "$local_rank" "$workers" \
            "$log_dir/worker_$((first_rank + local_rank)).log"
    done
    launch=("$python" "$msrun")
    if [[ -z $msrun ]]; then
        printf '# no msrun found for %s: it comes with MindSpore 2.3 or later\n' "$python"
        launch=(msrun)
    fi
    printf 'cd %q\n. ./env.sh\n' "$project_root"
    printf '# msrun starts python from PATH: %q/python runs %s\n' "$shim_dir" "$python"
    printf "PATH=%q:\"\$PATH\" " "$shim_dir"
    print_words "${launch[@]}" "${msrun_args[@]}"
    exit 0
fi

[[ -n $msrun ]] || die "no msrun found for $python, next to it or on PATH: msrun comes with MindSpore 2.3 or later"
cd "$project_root"
# shellcheck source=/dev/null  # env.sh is linted on its own
. ./env.sh
mkdir -p "$output" "$log_dir"
write_python_shim
msrun_pid=
trap 'on_signal 130 interrupted' INT
trap 'on_signal 129 "hung up"' HUP
trap 'on_signal 143 terminated' TERM
PATH=$shim_dir:$PATH "$python" "$msrun" "${msrun_args[@]}" </dev/null &
msrun_pid=$!
status=0
wait "$msrun_pid" || status=$?
if [[ $status -ne 0 ]]; then
    die "msrun exited with status $status; the worker logs are in $log_dir"
fi
if [[ $join == True ]]; then
    printf 'run_msrun.sh: all %s workers of this node finished; logs in %s\n' "$local_workers" "$log_dir"
else
    printf 'run_msrun.sh: %s workers started and left running; logs in %s\n' "$local_workers" "$log_dir"
fi
