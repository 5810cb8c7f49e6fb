#!/usr/bin/env bash
# Train with MindSpore's msrun: the scheduler (on the master node) and this node's
# workers, stopped together when one fails. Run it from anywhere: it works in the project root.
set -euo pipefail

usage() {
    cat <<USAGE
usage: scripts/run_msrun.sh [options] [-- TRAIN_ARGS...]

Start train.py under msrun (MindSpore 2.3 or later); arguments after -- go to every
train.py. Run it on every node of the job.

options:
  --nproc N            workers on this node (default: \$NPROC_PER_NODE, else $default_devices)
  --nnodes N           nodes in the job (default: \$NNODES, else $default_nodes)
  --worker-num N       workers in the whole job (default: nproc x nnodes)
  --node-rank N        this node's index; its workers are ranks N x nproc on (default: \$NODE_RANK, else 0)
  --master-addr HOST   the node that runs the scheduler (default: \$MASTER_ADDR, else 127.0.0.1)
  --master-port PORT   free TCP port there, 1024-65535 (default: \$MASTER_PORT, else 8118)
  --join-timeout S     how long a node waits for the others (default: \$JOIN_TIMEOUT, else 600)
  --max-restarts N     times this node's workers start again after one failed, each resuming
                       from the newest checkpoint (default: \$TRAIN_MAX_RESTARTS, else 2)
  --data DIR           dataset directory (default: \$DATA_DIR, else train.py's data_url)
  --output DIR         checkpoints (default: \$OUTPUT_DIR, else train.py's train_url)
  --log-dir DIR        scheduler.log and worker_N.log, an earlier attempt's in attempt_N/
                       (default: \$LOG_DIR, else OUTPUT/logs)
  --dry-run            print what each worker gets and the command, run nothing
  -h, --help           show this help

environment: PYTHON, the interpreter (default: python3).
msrun gives each worker RANK_ID, DEVICE_ID (its index on this node), RANK_SIZE and
the dynamic-cluster variables MS_ROLE, MS_WORKER_NUM, MS_SCHED_HOST, MS_SCHED_PORT.
With several nodes the interface that routes to --master-addr carries the job.
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"

# --worker-num is msrun's own: by default every node's --nproc, summed.
worker_num=''
parse_job 8118 --worker-num -- "$@"
worker_num=${worker_num:-$((nproc * nnodes))}
is_count "$worker_num" || die_usage "--worker-num must be a whole number from 1, not '$worker_num'"
first_rank=$((node_rank * nproc))
if [[ $((first_rank + nproc)) -gt $worker_num ]]; then
    die_usage "--node-rank $node_rank with --nproc $nproc needs ranks up to $((first_rank + nproc - 1)), but the job has $worker_num workers"
fi
absolute_paths
shim_dir=$log_dir/.rank_python
# msrun as a file: its console script next to the interpreter, else the first on PATH;
# run with "$python", so that this interpreter's MindSpore is the one imported.
msrun=$("$python" -c 'import os, sysconfig; p = os.path.join(sysconfig.get_path("scripts"), "msrun")
print(p if os.path.isfile(p) else "")' 2>/dev/null) || msrun=''
msrun=${msrun:-$(command -v msrun || true)}
cmd=("$python" "${msrun:-msrun}" --worker_num "$worker_num" --local_worker_num "$nproc"
    --node_rank "$node_rank" --master_addr "$master_addr" --master_port "$master_port"
    --log_dir "$log_dir" --join True --cluster_time_out "$join_timeout"
    train.py ${data_args[@]+"${data_args[@]}"} ${output_args[@]+"${output_args[@]}"} ${train_args[@]+"${train_args[@]}"})

if [[ $dry_run == true ]]; then
    printf '# msrun: %s workers on node %s (ranks %s-%s) of %s in all; scheduler at %s:%s; logs under %s\n' \
        "$nproc" "$node_rank" "$first_rank" "$((first_rank + nproc - 1))" "$worker_num" \
        "$master_addr" "$master_port" "$log_dir"
    for ((local_rank = 0; local_rank < nproc; local_rank++)); do
        rank=$((first_rank + local_rank))
        printf '# rank %s: RANK_ID=%s DEVICE_ID=%s RANK_SIZE=%s MS_ROLE=MS_WORKER (set by msrun), log %q\n' \
            "$rank" "$rank" "$local_rank" "$worker_num" "$log_dir/worker_$rank.log"
    done
    if [[ -z $msrun ]]; then printf '# no msrun found for %s: it comes with MindSpore 2.3 or later\n' "$python"; fi
    printf 'cd %q\n. ./env.sh\n' "$project_root"
    printf '# msrun starts python from PATH: %q/python runs %s\n' "$shim_dir" "$python"
    printf "PATH=%q:\"\$PATH\" " "$shim_dir"
    print_words "${cmd[@]}"
    exit 0
fi

[[ -n $msrun ]] || die "no msrun found for $python, next to it or on PATH: msrun comes with MindSpore 2.3 or later"
cd "$project_root"
# shellcheck source=/dev/null  # env.sh is linted on its own
. ./env.sh
preflight
if [[ $nnodes -gt 1 ]]; then choose_interface; fi
mkdir -p "$output"
# msrun starts every process as `python train.py` from PATH: ours (scripts/rank.sh) first.
rank_records
rank_python "$shim_dir" "$python"
export PATH=$shim_dir:$PATH

# MindSpore's workers say so once the cluster of every node's workers is built.
joined() { grep -qs "Cluster is successfully initialized" "$log_dir"/worker_*.log; }
# A worker that failed stops this node's at once (msrun would wait for its scheduler's
# timeout), as does one msrun saw fail before scripts/rank.sh ran it.
watching() { [[ -z $(first_failure "$attempt") ]] && ! grep -qs "^\[ERROR\].* exit with exception" "$log_dir/msrun.log"; }

while true; do
    run_attempt workers "$log_dir/msrun.log" "${cmd[@]}"
    # The node's own stop (its join timeout): the workers it stopped are not the failure.
    if [[ $job_status -eq 124 ]]; then job_failed "msrun did not join"; fi
    read -r rank _ status <<<"$(first_failure "$attempt")" || true
    # No worker failed, and the cluster never formed: msrun gave up waiting for the others.
    [[ -n ${rank:-} ]] || joined || job_status=124
    if [[ -z ${rank:-} || $job_status -gt 128 ]]; then
        job_failed "msrun exited with status $job_status; see $log_dir/msrun.log" "$log_dir/msrun.log"
    fi
    next_attempt "$rank" "$status" "$log_dir/worker_$rank.log" "" "the other workers of node $node_rank were stopped" \
        "$log_dir"/worker_*.log "$log_dir/scheduler.log" "$log_dir/msrun.log"
done
