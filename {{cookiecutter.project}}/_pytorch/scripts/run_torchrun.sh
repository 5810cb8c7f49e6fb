#!/usr/bin/env bash
# Train with torchrun: one process per device of this node, one node of one or several.
# Run it from anywhere: it works in the project root.
set -euo pipefail

usage() {
    cat <<USAGE
usage: scripts/run_torchrun.sh [options] [-- TRAIN_ARGS...]

Start train.py under torchrun; arguments after -- go to every train.py. Run it on
every node of the job.

options:
  --nproc N            processes (devices) on this node (default: \$NPROC_PER_NODE, else $default_devices)
  --nnodes N           nodes in the job (default: \$NNODES, else $default_nodes)
  --node-rank N        this node's index, 0 to nnodes-1 (default: \$NODE_RANK, else 0)
  --master-addr HOST   address of node 0 (default: \$MASTER_ADDR, else 127.0.0.1)
  --master-port PORT   free TCP port on node 0 (default: \$MASTER_PORT, else 29500)
  --join-timeout S     how long a node waits for the others (default: \$JOIN_TIMEOUT, else 600)
  --max-restarts N     times this node's ranks start again after one failed, each resuming
                       from the newest checkpoint (default: \$TRAIN_MAX_RESTARTS, else 2)
  --data DIR           dataset directory (default: \$DATA_DIR, else train.py's data_url)
  --output DIR         checkpoints (default: \$OUTPUT_DIR, else train.py's train_url)
  --log-dir DIR        per-rank logs (default: \$LOG_DIR, else OUTPUT/logs)
  --dry-run            print what each rank gets and the command, run nothing
  -h, --help           show this help

environment: PYTHON, the interpreter (default: python3).
With several nodes the interface that routes to --master-addr carries the job
(GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, unless set). When a rank fails,
torchrun stops the others and this script starts them again (not after a
configuration error, exit status 2); when no restart is left, it names the rank,
how it ended, and its log.
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"

parse_job 29500 -- "$@"
absolute_paths
world_size=$((nnodes * nproc))
cmd=("$python" -m torch.distributed.run
    --nnodes "$nnodes" --nproc_per_node "$nproc" --node_rank "$node_rank"
    --master_addr "$master_addr" --master_port "$master_port"
    --rdzv_conf "timeout=$join_timeout" --log_dir "$log_dir" --redirects 3 --tee 1
    train.py ${data_args[@]+"${data_args[@]}"} ${output_args[@]+"${output_args[@]}"} ${train_args[@]+"${train_args[@]}"})

if [[ $dry_run == true ]]; then
    printf '# torchrun: %s processes on node %s of %s, world size %s; logs under %s\n' \
        "$nproc" "$node_rank" "$nnodes" "$world_size" "$log_dir"
    for ((local_rank = 0; local_rank < nproc; local_rank++)); do
        rank=$((node_rank * nproc + local_rank))
        printf '# rank %s: RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s (set by torchrun)\n' \
            "$rank" "$rank" "$local_rank" "$world_size"
    done
    printf 'cd %q\n. ./env.sh\n' "$project_root"
    print_words "${cmd[@]}"
    exit 0
fi

cd "$project_root"
# shellcheck source=/dev/null  # env.sh is linted on its own
. ./env.sh
preflight
if [[ $nnodes -gt 1 ]]; then
    choose_interface
    cmd=("${cmd[@]:0:3}" --local_addr "$net_addr" "${cmd[@]:3}")
    printf '%s: node %s reaches %s:%s through %s (%s)\n' "$launcher_name" "$node_rank" \
        "$master_addr" "$master_port" "$net_iface" "$net_addr"
fi
mkdir -p "$output" "$log_dir"
# Each rank through scripts/rank.sh (torchrun runs PYTHON_EXEC, else its own interpreter).
rank_records
rank_python "$log_dir/.rank_python" "${PYTHON_EXEC:-$python}"
export PYTHON_EXEC=$log_dir/.rank_python/python

# torchrun starts the ranks only once every node has joined: their log files say so.
joined() { compgen -G "$log_dir/*/attempt_*/*/stdout.log" >/dev/null; }
# attempt_log LOCAL_RANK: that rank's stderr in torchrun's directory of this attempt
# (LOG_DIR/RUNID_random/attempt_0/LOCAL_RANK/), made after the stand-in was touched.
attempt_log() {
    local dir
    dir=$(find "$log_dir" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -newer "$PYTHON_EXEC" | head -n 1)
    printf '%s/attempt_0/%s/stderr.log' "${dir:-$log_dir/?}" "$1"
}

# Each attempt a torchrun of its own: torchrun's restarts (static rendezvous) keep the first
# attempt's store, where the ranks would find their peers' old addresses.
while true; do
    touch "$PYTHON_EXEC"
    run_attempt ranks "$log_dir/torchrun.log" "${cmd[@]}"
    # The rank that failed first, as scripts/rank.sh recorded it; else torchrun's report.
    read -r rank local_rank status <<<"$(first_failure "$attempt")" || true
    if [[ -z ${rank:-} || $job_status -gt 128 ]]; then
        read -r rank local_rank status <<<"$(root_cause "$log_dir/torchrun.log")" || true
        # No rank ran, and none failed: torchrun gave up waiting for the other nodes.
        [[ -n ${rank:-} ]] || joined || job_status=124
        job_failed "torchrun exited with status $job_status; see $log_dir/torchrun.log" "$log_dir/torchrun.log"
    fi
    # Rank 0's log, when it ran here: whether the outputs were complete.
    next_attempt "$rank" "$status" "$(attempt_log "$local_rank")" "$(if [[ $node_rank -eq 0 ]]; then attempt_log 0; fi)" \
        "torchrun stopped the other ranks of node $node_rank" "$log_dir/torchrun.log"
done
