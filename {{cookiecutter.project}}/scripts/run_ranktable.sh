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
  --rank-table FILE    the job's HCCL rank table (default: \$RANK_TABLE_FILE; without one, {% if ms %}one for
                       this host is made from --hccn-conf (a one-node job){% else %}ranks are
                       node-rank x nproc + i on devices 0 to nproc-1{% endif %}). A table of one server
                       runs on this host, whatever address it gives; servers named, not
                       addressed ("node_0"), are found by --node-rank{% if ms %}
  --hccn-conf FILE     the devices' addresses, for a table made here (default: /etc/hccn.conf){% endif %}
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
  --log-by rank|device logs LOG_DIR/rank_N/train.log (default), or ModelZoo's LOG_DIR/ID/train_ID.log
  --bind-cores         pin each rank to its own slice of this node's CPU cores (taskset)
  --dry-run            print every rank's environment and command, run nothing
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"
# shellcheck source-path=SCRIPTDIR source=per_rank.sh
. "$project_root/scripts/per_rank.sh"

job_defaults 29500
# No node rank nor master by default: the table's entry for this host says them.
node_rank=${NODE_RANK:-} master_addr=${MASTER_ADDR:-}
rank_table=${RANK_TABLE_FILE:-}{% if ms %} hccn_conf=/etc/hccn.conf{% endif %}
chip={{ cookiecutter.chip | shell_quote }} wait_table=false log_by=rank bind_cores=false
stop_timeout=${RANK_STOP_TIMEOUT:-10}
value_options="$job_options --rank-table --chip --log-by{% if ms %} --hccn-conf{% endif %}"
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
# This host's addresses: the platform's word for it first.
mapfile -t here < <("$python" "$project_root/scripts/cluster.py" addresses)
here=(${XDL_IP:+"$XDL_IP"} ${POD_IP:+"$POD_IP"} ${MA_CURRENT_IP:+"$MA_CURRENT_IP"} ${here[@]+"${here[@]}"})
{%- if ms %}
# MindSpore's ranks meet through a table: without one, one for this host's devices.
if [[ -z $rank_table ]]; then
    [[ $nnodes -eq 1 ]] || die "a $nnodes-node job needs the job's rank table (gen ranktable merge joins the nodes' own): pass --rank-table FILE or set RANK_TABLE_FILE"
    rank_table=$log_dir/rank_table.json
    made=$("$python" "$project_root/scripts/rank_table.py" local -o "$rank_table" --nproc "$nproc" --chip "$chip" \
        --hccn-conf "$hccn_conf" "${here[@]/#/--address=}" 2>&1) || die "no rank table was given and none could be made for this host: ${made#error: }; set RANK_TABLE_FILE (or pass --rank-table FILE), or give this host's hccn.conf (--hccn-conf FILE)"
    echo "$launcher_name: $made" >&2
fi
{%- endif %}
if [[ -n $rank_table ]]; then
    [[ -e $rank_table || $wait_table == true ]] || die "rank table $rank_table not found: pass --rank-table FILE or set RANK_TABLE_FILE"
    if [[ $wait_table == true ]]; then "$python" "$project_root/scripts/cluster.py" wait-table "$rank_table" "$join_timeout" || exit 1; fi
    lookup=("$python" "$project_root/scripts/rank_table.py" node "$rank_table" --chip "$chip" --nproc "$nproc")
    if [[ $node_rank_given == true ]]; then lookup+=(--node-rank "$node_rank"); fi
    lookup+=("${here[@]/#/--address=}" --converted "$log_dir/rank_table.json")
    node=$("${lookup[@]}" 2>&1) || die "rank table $rank_table, no rank was started: ${node#error: }"
    while read -r key first second third; do
        case $key in
            RANK_SIZE) rank_size=$first ;;
            NODE) node_rank=$first ;;
            MASTER) master_addr=${MASTER_ADDR:-$first} ;;
            RANK) ranks+=("$first") devices+=("$second") ids+=("$third") ;;
            NOTE) echo "$launcher_name: note: $first $second $third" >&2 ;;
            TABLE) rank_table=$first ;;
        esac
    done <<<"$node"
else
    for ((i = 0; i < nproc; i++)); do ranks+=($((node_rank * nproc + i))) devices+=("$i") ids+=("$i"); done
fi

# A rank's place is its RANK_ID and DEVICE_ID: the pod-wide torch variables an operator may
# set (WORLD_SIZE, RANK, LOCAL_RANK) would override them, so no rank inherits them.
unset WORLD_SIZE RANK LOCAL_RANK

# The environment and command of local rank $1, into env_words and run_words.
rank_env() {
    env_words=("RANK_SIZE=$rank_size" "RANK_ID=${ranks[$1]}" "DEVICE_ID=${ids[$1]}" "ASCEND_DEVICE_ID=${ids[$1]}")
    if [[ -n $rank_table ]]; then env_words=("RANK_TABLE_FILE=$rank_table" "${env_words[@]}"); fi
{%- if not ms %}
    env_words+=("MASTER_ADDR=$master_addr" "MASTER_PORT=$master_port" "LOCAL_WORLD_SIZE=$nproc" "TRAIN_JOIN_TIMEOUT=$join_timeout")
{%- endif %}
    run_words=("$python" "$project_root/train.py" ${data_args[@]+"${data_args[@]}"} ${output_args[@]+"${output_args[@]}"}
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
        printf '# rank %s, log %q\n' "${ranks[i]}" "$(rank_log "$i")"
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
# The table's other nodes: the preflight takes no lock on an output the job's nodes share.
if [[ $rank_size -gt $nproc ]]; then nnodes=$(((rank_size + nproc - 1) / nproc)); fi
preflight
if [[ $rank_size -gt $nproc ]]; then choose_interface; fi
run_ranks
printf '%s: all %s ranks of node %s finished; logs in %s\n' "$launcher_name" "$nproc" "$node_rank" "$log_dir"
