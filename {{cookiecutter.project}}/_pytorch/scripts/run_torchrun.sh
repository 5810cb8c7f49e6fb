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
  --data DIR           dataset directory (default: \$DATA_DIR, else train.py's data_url)
  --output DIR         checkpoints (default: \$OUTPUT_DIR, else train.py's train_url)
  --log-dir DIR        per-rank logs (default: \$LOG_DIR, else OUTPUT/logs)
  --dry-run            print what each rank gets and the command, run nothing
  -h, --help           show this help

environment: PYTHON, the interpreter (default: python3).
With several nodes the interface that routes to --master-addr carries the job
(GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, unless set). When a rank fails,
torchrun stops the others and this script names the rank and its log.
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

# torchrun starts the ranks only once every node has joined: their log files say so.
joined() { compgen -G "$log_dir/*/attempt_*/*/stdout.log" >/dev/null; }

watch_job "$log_dir/torchrun.log" "${cmd[@]}"
if [[ $job_status -eq 0 ]]; then
    printf '%s: all %s ranks of node %s finished; logs in %s\n' "$launcher_name" "$nproc" "$node_rank" "$log_dir"
    exit 0
fi
read -r rank local_rank exitcode <<<"$(root_cause "$log_dir/torchrun.log")" || true
# No rank ran, and none failed: torchrun gave up waiting for the other nodes.
[[ -n ${rank:-} ]] || joined || job_status=124
if [[ -z ${rank:-} ]]; then
    job_failed "torchrun exited with status $job_status; see $log_dir/torchrun.log"
fi
rank_log=$(compgen -G "$log_dir/*/attempt_*/$local_rank/stderr.log" | tail -n 1)
# Rank 0's log, when it ran here: whether the outputs were complete.
first_log=$(if [[ $node_rank -eq 0 ]]; then compgen -G "$log_dir/*/attempt_*/0/stderr.log" | tail -n 1; fi)
if [[ $exitcode == -6 ]] && reason=$(aborted_after_training "$rank" "$rank_log" "$first_log"); then
    job_failed "$reason" "$rank_log"
fi
job_failed "rank $rank failed$(first_error "$rank_log"); torchrun stopped the other ranks of node $node_rank; its log: $rank_log" "$rank_log"
