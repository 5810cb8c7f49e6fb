#!/usr/bin/env bash
{%- set ms = cookiecutter.framework == 'mindspore' %}
{%- set target = cookiecutter.target %}
{%- set per_rank = target in ('ascend', 'both') %}
{%- set spawner = 'msrun' if ms else 'torchrun' %}
{%- set master = not ms or target != 'ascend' %}
# Train on every device of this node, and of other nodes with --nnodes.
# Run it from anywhere: it works in the project root.
set -euo pipefail

# The defaults chosen when the project was generated.
default_devices={{ cookiecutter.devices_per_node | shell_quote }}
default_nodes={{ cookiecutter.nnodes | shell_quote }}

usage() {
    cat <<USAGE
usage: scripts/run_8p.sh [options] [-- TRAIN_ARGS...]

Start one train.py process per device; arguments after -- go to every
train.py as they are.

options:
  --nproc N            processes (devices) on this node (default: \$NPROC_PER_NODE, else $default_devices)
  --nnodes N           nodes in the job (default: \$NNODES, else $default_nodes)
  --node-rank N        this node's index, 0 to nnodes-1 (default: \$NODE_RANK, else 0)
{%- if master %}
  --master-addr HOST   address of node 0 (default: \$MASTER_ADDR, else 127.0.0.1)
  --master-port PORT   free TCP port on node 0 (default: \$MASTER_PORT, else 29500)
{%- endif %}
{%- if target == 'both' %}
  --launcher NAME      {{ spawner }}, per-rank or auto: per-rank on Ascend
                       (/dev/davinci0 exists), else {{ spawner }} (default: \$LAUNCHER, else auto)
{%- endif %}
{%- if ms and per_rank %}
  --rank-table FILE    HCCL rank table of the whole job, for the per-rank launcher
                       (default: \$RANK_TABLE_FILE, else ./rank_table_8p.json)
  --bind-cores         pin each rank to its own slice of this node's CPU cores (taskset)
{%- endif %}
  --data DIR           dataset directory (default: \$DATA_DIR, else ./data)
  --output DIR         checkpoints (default: \$OUTPUT_DIR, else ./output)
  --log-dir DIR        per-rank logs (default: \$LOG_DIR, else OUTPUT/logs)
  --dry-run            print every rank's environment and command, run nothing
  -h, --help           show this help

environment:
  PYTHON               interpreter to run train.py with (default: python3)
{%- if per_rank %}
  RANK_STOP_TIMEOUT    seconds a rank gets to exit after SIGTERM before SIGKILL (default: 10)
{%- endif %}

Relative paths are taken from the directory you run the script in; the
defaults are inside the project.
{%- if per_rank and not ms %}

The per-rank launcher gives each process RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT, and Ascend's RANK_ID, DEVICE_ID and RANK_SIZE;
each writes OUTPUT/logs/rank_N/train.log, and local rank 0 also prints here.
When one rank fails, the others are stopped at once.
{%- elif per_rank %}

The per-rank launcher is MindSpore's rank-table mode: it checks the rank table
before any rank starts, then gives each process RANK_TABLE_FILE, RANK_SIZE,
RANK_ID and DEVICE_ID. Rank N runs in LOG_DIR/rank_N/ (OUTPUT/logs/rank_N/),
where MindSpore leaves its per-process files, and logs to train.log there;
local rank 0 also prints here. Paths after -- are read from that directory:
make them absolute.
When one rank fails, the others are stopped at once.
{%- endif %}
{%- if ms and target != 'ascend' %}

msrun: the job goes to scripts/run_msrun.sh (MindSpore 2.3 or later), which
starts MindSpore's scheduler on node 0 and the workers on every node.
{%- endif %}

example, two nodes:
{%- if master %}
  node 0: scripts/run_8p.sh --nnodes 2 --node-rank 0 --master-addr 10.0.0.1
  node 1: scripts/run_8p.sh --nnodes 2 --node-rank 1 --master-addr 10.0.0.1
{%- else %}
  node 0: scripts/run_8p.sh --nnodes 2 --node-rank 0 --rank-table /job/rank_table.json
  node 1: scripts/run_8p.sh --nnodes 2 --node-rank 1 --rank-table /job/rank_table.json
{%- endif %}
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"
{% if per_rank or not ms %}
python=${PYTHON:-python3}
{%- endif %}
nproc=${NPROC_PER_NODE:-$default_devices}
nnodes=${NNODES:-$default_nodes}
node_rank=${NODE_RANK:-0}
{%- if master %}
master_addr=${MASTER_ADDR:-127.0.0.1}
master_port=${MASTER_PORT:-29500}
{%- endif %}
{%- if target == 'both' %}
launcher=${LAUNCHER:-auto}
{%- endif %}
{%- if ms and per_rank %}
rank_table=${RANK_TABLE_FILE:+$(absolute "$RANK_TABLE_FILE")}
bind_cores=false
{%- endif %}
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
        --nproc | --nnodes | --node-rank{% if master %} | --master-addr | --master-port{% endif %} | --data | --output | --log-dir{% if target == 'both' %} | --launcher{% endif %}{% if ms and per_rank %} | --rank-table{% endif %})
            [[ $# -ge 2 && -n $2 && $2 != --* ]] || die_usage "$1 needs a value"
            case $1 in
                --nproc) nproc=$2 ;;
                --nnodes) nnodes=$2 ;;
                --node-rank) node_rank=$2 ;;
{%- if master %}
                --master-addr) master_addr=$2 ;;
                --master-port) master_port=$2 ;;
{%- endif %}
{%- if target == 'both' %}
                --launcher) launcher=$2 ;;
{%- endif %}
{%- if ms and per_rank %}
                --rank-table) rank_table=$(absolute "$2") ;;
{%- endif %}
                --data) data=$(absolute "$2") ;;
                --output) output=$(absolute "$2") ;;
                --log-dir) log_dir=$(absolute "$2") ;;
            esac
            shift 2
            ;;
{%- if ms and per_rank %}
        --bind-cores) bind_cores=true; shift ;;
{%- endif %}
        --dry-run) dry_run=true; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; train_args=("$@"); break ;;
        *) die_usage "unknown argument: $1" ;;
    esac
done

is_count "$nproc" || die_usage "--nproc must be a whole number from 1, not '$nproc'"
is_count "$nnodes" || die_usage "--nnodes must be a whole number from 1, not '$nnodes'"
is_index "$node_rank" || die_usage "--node-rank must be a whole number from 0, not '$node_rank'"
[[ $node_rank -lt $nnodes ]] || die_usage "--node-rank $node_rank is not below --nnodes $nnodes"
{%- if master %}
if ! is_count "$master_port" || [[ $master_port -gt 65535 ]]; then
    die_usage "--master-port must be a TCP port from 1 to 65535, not '$master_port'"
fi
{%- endif %}
{%- if per_rank %}
check_stop_timeout
{%- endif %}
{%- if target == 'both' %}
case $launcher in
    {{ spawner }} | per-rank) ;;
{%- if ms %}
    # An NPU node has /dev/davinci0: rank tables there, as ModelZoo does; msrun on GPUs and CPUs.
{%- else %}
    # An NPU node has /dev/davinci0; torchrun's NCCL path is for GPUs.
{%- endif %}
    auto) if [[ -e /dev/davinci0 ]]; then launcher=per-rank; else launcher={{ spawner }}; fi ;;
    *) die_usage "--launcher must be {{ spawner }}, per-rank or auto, not '$launcher'" ;;
esac
{%- endif %}
{%- if ms and per_rank %}
rank_table=${rank_table:-$project_root/rank_table_8p.json}
{%- endif %}
log_dir=${log_dir:-$output/logs}
world_size=$((nnodes * nproc))
{%- if not ms %}
train=(train.py --data_url "$data" --train_url "$output" ${train_args[@]+"${train_args[@]}"})
{%- endif %}
{% if target in ('cuda', 'both') and not ms %}
run_torchrun() {
    # torchrun starts the ranks, sets their RANK/LOCAL_RANK/WORLD_SIZE and stops
    # them all when one fails; --redirects/--tee keep each rank's output in
    # LOG_DIR and show it here. Underscore flags work on every torch since 1.10.
    local cmd=("$python" -m torch.distributed.run
        --nnodes "$nnodes" --nproc_per_node "$nproc" --node_rank "$node_rank"
        --master_addr "$master_addr" --master_port "$master_port"
        --log_dir "$log_dir" --redirects 3 --tee 3
        "${train[@]}")
    if [[ $dry_run == true ]]; then
        printf '# torchrun: %s processes on node %s of %s, world size %s; logs under %s\n' \
            "$nproc" "$node_rank" "$nnodes" "$world_size" "$log_dir"
        local local_rank
        for ((local_rank = 0; local_rank < nproc; local_rank++)); do
            printf '# rank %s: RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s (set by torchrun)\n' \
                "$((node_rank * nproc + local_rank))" "$((node_rank * nproc + local_rank))" \
                "$local_rank" "$world_size"
        done
        printf 'cd %q\n. ./env.sh\n' "$project_root"
        print_words "${cmd[@]}"
        return 0
    fi
    cd "$project_root"
    # shellcheck source=/dev/null  # env.sh is linted on its own
    . ./env.sh
    mkdir -p "$output" "$log_dir"
    exec "${cmd[@]}"
}
{% elif target in ('cuda', 'both') %}
run_msrun() {
    # One msrun launcher for both scripts: run_msrun.sh owns the msrun command.
    # bash, not ./run_msrun.sh: uploads to a platform often lose the x bit.
    local args=(--worker-num "$world_size" --local-worker-num "$nproc" --node-rank "$node_rank"
        --master-addr "$master_addr" --master-port "$master_port"
        --data "$data" --output "$output" --log-dir "$log_dir")
    if [[ $dry_run == true ]]; then args+=(--dry-run); fi
    exec bash "$project_root/scripts/run_msrun.sh" "${args[@]}" -- ${train_args[@]+"${train_args[@]}"}
}
{% endif %}
{%- if per_rank and not ms %}
# The environment of local rank $1, as torchrun sets it (RANK, LOCAL_RANK,
# WORLD_SIZE) and as Ascend's ModelZoo scripts do (RANK_ID, DEVICE_ID per node,
# RANK_SIZE), into env_words; its global rank into rank, its directory into dir.
rank_env() {
    rank=$((node_rank * nproc + $1))
    dir=$log_dir/rank_$rank
    env_words=("RANK=$rank" "LOCAL_RANK=$1" "WORLD_SIZE=$world_size"
        "LOCAL_WORLD_SIZE=$nproc" "RANK_ID=$rank" "DEVICE_ID=$1"
        "RANK_SIZE=$world_size" "MASTER_ADDR=$master_addr" "MASTER_PORT=$master_port")
    run_words=("$python" "${train[@]}")
}
{%- elif per_rank %}
# MindSpore reads the rank table itself on every rank, after minutes of start-up
# on a real job: check it, and that it is this job's, before any rank starts.
check_rank_table() {
    local count_re='([0-9]+) rank\(s\)'
    command -v "$python" >/dev/null || die "PYTHON=$python: no such interpreter"
    [[ -e $rank_table ]] || die "rank table $rank_table not found: pass --rank-table FILE or set RANK_TABLE_FILE (scripts/rank_table.py generate writes one from /etc/hccn.conf)"
    if ! table_summary=$("$python" "$project_root/scripts/rank_table.py" check "$rank_table" 2>&1); then
        printf 'error: rank table %s is invalid, no rank was started:\n' "$rank_table" >&2
        printf '%s\n' "$table_summary" | sed 's/^\(error: \)\{0,1\}/    /' >&2
        exit 1
    fi
    [[ $table_summary =~ $count_re ]] || die "cannot read the rank count from: $table_summary"
    if [[ ${BASH_REMATCH[1]} -ne $world_size ]]; then
        die "rank table $rank_table has ${BASH_REMATCH[1]} ranks, but this job has $world_size (--nnodes $nnodes x --nproc $nproc); no rank was started"
    fi
}

# The environment of local rank $1 as MindSpore's rank-table mode reads it,
# into env_words; its global rank into rank, its directory into dir and the
# command (pinned to its cores with --bind-cores) into run_words.
rank_env() {
    rank=$((node_rank * nproc + $1))
    dir=$log_dir/rank_$rank
    env_words=("RANK_TABLE_FILE=$rank_table" "RANK_SIZE=$world_size" "RANK_ID=$rank" "DEVICE_ID=$1")
    run_words=("$python" "$project_root/train.py" --data_url "$data" --train_url "$output"
        ${train_args[@]+"${train_args[@]}"})
    if [[ -n ${core_slice[$1]:-} ]]; then run_words=(taskset -c "${core_slice[$1]}" "${run_words[@]}"); fi
}
{%- endif %}
{%- if per_rank %}

run_per_rank() {
    local local_rank rank dir show
    local -a env_words run_words rank_dirs=()
{%- if ms %}
    local table_summary
    local -a core_slice=()
    check_rank_table
    if [[ $bind_cores == true ]]; then mapfile -t core_slice < <(core_slices "$nproc"); fi
{%- endif %}
    if [[ $dry_run == true ]]; then
{%- if ms %}
        printf '# per-rank (rank table): %s processes on node %s of %s, rank size %s\n' \
            "$nproc" "$node_rank" "$nnodes" "$world_size"
        printf '# %s: %s\n' "$rank_table" "$table_summary"
{%- else %}
        printf '# per-rank: %s processes on node %s of %s, world size %s\n' \
            "$nproc" "$node_rank" "$nnodes" "$world_size"
{%- endif %}
        printf 'cd %q\n. ./env.sh\n' "$project_root"
        for ((local_rank = 0; local_rank < nproc; local_rank++)); do
            rank_env "$local_rank"
            printf '# rank %s, log %q\n' "$rank" "$dir/train.log"
{%- if ms %}
            printf 'cd %q\n' "$dir"
{%- endif %}
            print_words "${env_words[@]}" "${run_words[@]}"
        done
        return 0
    fi

    cd "$project_root"
    # shellcheck source=/dev/null  # env.sh is linted on its own
    . ./env.sh
    # Everything that can fail comes first: once one rank runs, the launcher
    # must reach watch_ranks.
    for ((local_rank = 0; local_rank < nproc; local_rank++)); do
        rank_dirs+=("$log_dir/rank_$((node_rank * nproc + local_rank))")
    done
    mkdir -p "$output" "${rank_dirs[@]}"
    trap_signals
    for ((local_rank = 0; local_rank < nproc; local_rank++)); do
        rank_env "$local_rank"
        # Local rank 0 is also shown here, so that a platform's job log has it.
        show=false
        if [[ $local_rank -eq 0 ]]; then show=true; fi
        start_rank "$rank" {{ '"$dir"' if ms else '"$project_root"' }} "$dir/train.log" "$show" \
            env "${env_words[@]}" "${run_words[@]}"
    done
    watch_ranks
    printf 'run_8p.sh: all %s ranks finished; logs in %s\n' "$nproc" "$log_dir"
}
{% endif %}
{%- if target == 'both' %}
case $launcher in
    {{ spawner }}) run_{{ spawner }} ;;
    per-rank) run_per_rank ;;
esac
{%- elif target == 'cuda' %}
run_{{ spawner }}
{%- else %}
run_per_rank
{%- endif %}
