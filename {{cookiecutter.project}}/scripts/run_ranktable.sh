#!/usr/bin/env bash
{%- set ms = cookiecutter.framework == 'mindspore' %}
# Train on this node's Ascend devices, one process per device, the HCCL rank table's
# way: each process gets RANK_ID and DEVICE_ID from this node's entry in the table.
# When one rank fails the others are stopped at once. Run it from anywhere.
set -euo pipefail

usage() {
    cat <<USAGE
usage: scripts/run_ranktable.sh [options] [-- TRAIN_ARGS...]

options:
  --rank-table FILE    the job's HCCL rank table (default: \$RANK_TABLE_FILE{% if ms %}, else ./rank_table_8p.json{% else %}; without
                       one, ranks are node-rank x nproc + i on devices 0 to nproc-1{% endif %})
  --node-rank N        this node's entry in the table (default: \$NODE_RANK, else the entry
                       listing one of this host's addresses, or \$XDL_IP / \$POD_IP / \$MA_CURRENT_IP)
  --nproc N            processes (devices) on this node (default: \$NPROC_PER_NODE, else $default_devices)
  --nnodes N           nodes, without a table (default: \$NNODES, else $default_nodes)
  --master-addr HOST   where the ranks meet (default: \$MASTER_ADDR, else rank 0's server in the table)
  --master-port PORT   free TCP port there (default: \$MASTER_PORT, else 29500)
  --wait-table         wait for an operator to finish writing the table ("status": "completed")
  --join-timeout S     longest wait for the table and for the other ranks (default: 600)
  --chip CHIP          the table's rules: 910, 910b, 910_93 (default: {{ cookiecutter.chip }})
  --data DIR, --output DIR, --log-dir DIR   as for run_1p.sh; logs: OUTPUT/logs/rank_N/
  --log-by rank|device name each rank's log directory rank_N (default) or by its device id
  --bind-cores         pin each rank to its own slice of this node's CPU cores (taskset)
  --dry-run            print every rank's environment and command, run nothing
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"

job_defaults 29500
# No node rank nor master by default: the table's entry for this host says them.
node_rank=${NODE_RANK:-} master_addr=${MASTER_ADDR:-}
rank_table=${RANK_TABLE_FILE:-{% if ms %}$project_root/rank_table_8p.json{% endif %}}
chip={{ cookiecutter.chip | shell_quote }} wait_table=false log_by=rank bind_cores=false
stop_timeout=${RANK_STOP_TIMEOUT:-10}
value_options="$job_options --rank-table --chip --log-by"
flag_options="--wait-table --bind-cores --dry-run"
parse_options "$@"
node_rank_given=${node_rank:+true}
node_rank=${node_rank:-0} master_addr=${master_addr:-127.0.0.1}
# With a table, the table says how many nodes there are.
if [[ -n $rank_table ]] && is_index "$node_rank"; then nnodes=$((node_rank + 1)); fi
check_job_options
[[ $log_by == rank || $log_by == device ]] || die_usage "--log-by must be rank or device, not '$log_by'"
is_index "$stop_timeout" || die_usage "RANK_STOP_TIMEOUT must be whole seconds, not '$stop_timeout'"
absolute_paths
rank_table=$(absolute "$rank_table")

# This node's ranks, from the table (or counted without one): rank_size, ranks, devices (the
# table's physical ids) and ids (each process's DEVICE_ID: its index among this container's).
ranks=() devices=() ids=() rank_size=$((nnodes * nproc))
if [[ -n $rank_table ]]; then
    [[ -e $rank_table || $wait_table == true ]] || die "rank table $rank_table not found: pass --rank-table FILE or set RANK_TABLE_FILE"
    if [[ $wait_table == true ]]; then "$python" "$project_root/scripts/cluster.py" wait-table "$rank_table" "$join_timeout" || exit 1; fi
    lookup=("$python" "$project_root/scripts/rank_table.py" node "$rank_table" --chip "$chip" --nproc "$nproc")
    if [[ $node_rank_given == true ]]; then lookup+=(--node-rank "$node_rank"); fi
    for address in ${XDL_IP:-} ${POD_IP:-} ${MA_CURRENT_IP:-} $("$python" "$project_root/scripts/cluster.py" addresses); do
        lookup+=(--address "$address")
    done
    node=$("${lookup[@]}" 2>&1) || die "rank table $rank_table, no rank was started: ${node#error: }"
    while read -r key first second third; do
        case $key in
            RANK_SIZE) rank_size=$first ;;
            NODE) node_rank=$first ;;
            MASTER) master_addr=${MASTER_ADDR:-$first} ;;
            RANK) ranks+=("$first") devices+=("$second") ids+=("$third") ;;
        esac
    done <<<"$node"
else
    for ((i = 0; i < nproc; i++)); do ranks+=($((node_rank * nproc + i))) devices+=("$i") ids+=("$i"); done
fi

# A rank's place is its RANK_ID and DEVICE_ID: the pod-wide torch variables an operator may
# set (WORLD_SIZE, RANK, LOCAL_RANK) would override them, so no rank inherits them.
unset WORLD_SIZE RANK LOCAL_RANK

# The log directory of local rank $1: by its rank, or by its device (ModelZoo's way).
rank_dir() {
    if [[ $log_by == rank ]]; then printf '%s/rank_%s' "$log_dir" "${ranks[$1]}"; else printf '%s/%s' "$log_dir" "${ids[$1]}"; fi
}

# The environment and command of local rank $1, into env_words and run_words.
rank_env() {
    env_words=("RANK_SIZE=$rank_size" "RANK_ID=${ranks[$1]}" "DEVICE_ID=${ids[$1]}" "ASCEND_DEVICE_ID=${ids[$1]}")
    if [[ -n $rank_table ]]; then env_words=("RANK_TABLE_FILE=$rank_table" "${env_words[@]}"); fi
{%- if not ms %}
    env_words+=("MASTER_ADDR=$master_addr" "MASTER_PORT=$master_port" "LOCAL_WORLD_SIZE=$nproc")
{%- endif %}
    run_words=("$python" "$project_root/train.py" --data_url "$data" --train_url "$output"
        ${train_args[@]+"${train_args[@]}"})
    if [[ -n ${cores[$1]:-} ]]; then run_words=(taskset -c "${cores[$1]}" "${run_words[@]}"); fi
}

# With --bind-cores, each local rank's slice of the cores this launcher may use.
cores=()
if [[ $bind_cores == true ]]; then
    if command -v taskset >/dev/null; then
        mapfile -t cores < <("$python" "$project_root/scripts/cluster.py" cores "$nproc")
    else
        echo "$launcher_name: no taskset here; --bind-cores is ignored" >&2
    fi
fi

if [[ $dry_run == true ]]; then
    printf '# per-rank: %s processes on node %s, rank size %s%s\n' "$nproc" "$node_rank" \
        "$rank_size" "${rank_table:+, rank table $rank_table}"
    printf 'cd %q\n. ./env.sh\n' "$project_root"
    for ((i = 0; i < nproc; i++)); do
        rank_env "$i"
        printf '# rank %s, log %q\n' "${ranks[i]}" "$(rank_dir "$i")/train.log"
        print_words "${env_words[@]}" "${run_words[@]}"
    done
    exit 0
fi

cd "$project_root"
# HCCL waits this long for every rank to connect (CANN allows 120-7200 s); before env.sh,
# whose default it replaces (a value you set still wins).
: "${HCCL_CONNECT_TIMEOUT:=$((join_timeout < 120 ? 120 : join_timeout > 7200 ? 7200 : join_timeout))}"
export HCCL_CONNECT_TIMEOUT
# shellcheck source=/dev/null  # env.sh is linted on its own
. ./env.sh
preflight
if [[ $rank_size -gt $nproc ]]; then choose_interface; fi
pids=() logs=()
# SIGTERM to every rank's session, SIGKILL to what outlives RANK_STOP_TIMEOUT seconds.
stop_ranks() {
    local pid waited
    for pid in ${pids[@]+"${pids[@]}"}; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for ((waited = 0; waited < stop_timeout * 5; waited++)); do
        kill -0 ${pids[@]+"${pids[@]/#/-}"} 2>/dev/null || break
        sleep 0.2
    done
    for pid in ${pids[@]+"${pids[@]}"}; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}
trap 'echo "$launcher_name: interrupted; stopping every rank" >&2; stop_ranks; exit 130' INT
trap 'echo "$launcher_name: terminated; stopping every rank" >&2; stop_ranks; exit 143' TERM
# start_rank I: local rank I in its own session and directory (where MindSpore and CANN
# leave per-process files), its output in train.log there; local rank 0 is shown here too,
# so that a platform's job log has it.
start_rank() {
    local dir
    dir=$(rank_dir "$1")
    if [[ $1 -eq 0 ]]; then exec > >(tee "$dir/train.log"); else exec >"$dir/train.log"; fi
    cd "$dir" && exec setsid env "${env_words[@]}" "${run_words[@]}" </dev/null 2>&1
}
for ((i = 0; i < nproc; i++)); do
    rank_env "$i"
    logs+=("$(rank_dir "$i")/train.log")
    mkdir -p "${logs[i]%/*}" "$output"
    start_rank "$i" &
    pids+=("$!")
    printf '%s: rank %s on device %s (id %s here, pid %s), log %s\n' "$launcher_name" "${ranks[i]}" "${devices[i]}" "${ids[i]}" "$!" "${logs[i]}"
done
# Poll rather than `wait -n`: bash before 5.1 cannot say which rank ended.
left=$nproc
while [[ $left -gt 0 ]]; do
    for i in "${!pids[@]}"; do
        if [[ -z ${pids[i]} ]] || kill -0 "${pids[i]}" 2>/dev/null; then continue; fi
        status=0
        wait "${pids[i]}" || status=$?
        pids[i]='' left=$((left - 1))
        if [[ $status -ne 0 ]]; then
            stop_ranks
            # 134: SIGABRT; rank 0's log, when it ran here, says whether the outputs were complete.
            first=$(for j in "${!ranks[@]}"; do if [[ ${ranks[j]} -eq 0 ]]; then echo "${logs[j]}"; fi; done)
            if [[ $status -eq 134 ]] && reason=$(aborted_after_training "${ranks[i]}" "${logs[i]}" "$first"); then
                die "$reason" "${logs[i]}"
            fi
            die "rank ${ranks[i]} exited with status $status; the other ranks were stopped; its log: ${logs[i]}" "${logs[i]}"
        fi
    done
    sleep 0.5
done
printf '%s: all %s ranks of node %s finished; logs in %s\n' "$launcher_name" "$nproc" "$node_rank" "$log_dir"
