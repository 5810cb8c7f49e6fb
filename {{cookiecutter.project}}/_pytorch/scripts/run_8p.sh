#!/usr/bin/env bash
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
  --master-addr HOST   address of node 0 (default: \$MASTER_ADDR, else 127.0.0.1)
  --master-port PORT   free TCP port on node 0 (default: \$MASTER_PORT, else 29500)
{%- if cookiecutter.target == 'both' %}
  --launcher NAME      torchrun, per-rank or auto: per-rank on Ascend
                       (/dev/davinci0 exists), else torchrun (default: \$LAUNCHER, else auto)
{%- endif %}
  --data DIR           dataset directory (default: \$DATA_DIR, else ./data)
  --output DIR         checkpoints (default: \$OUTPUT_DIR, else ./output)
  --log-dir DIR        per-rank logs (default: \$LOG_DIR, else OUTPUT/logs)
  --dry-run            print every rank's environment and command, run nothing
  -h, --help           show this help

environment:
  PYTHON               interpreter to run train.py with (default: python3)
{%- if cookiecutter.target in ('ascend', 'both') %}
  RANK_STOP_TIMEOUT    seconds a rank gets to exit after SIGTERM before SIGKILL (default: 10)
{%- endif %}

Relative paths are taken from the directory you run the script in; the
defaults are inside the project.
{%- if cookiecutter.target in ('ascend', 'both') %}

The per-rank launcher gives each process RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT, and Ascend's RANK_ID, DEVICE_ID and RANK_SIZE;
each writes OUTPUT/logs/rank_N/train.log, and local rank 0 also prints here.
When one rank fails, the others are stopped at once.
{%- endif %}

example, two nodes:
  node 0: scripts/run_8p.sh --nnodes 2 --node-rank 0 --master-addr 10.0.0.1
  node 1: scripts/run_8p.sh --nnodes 2 --node-rank 1 --master-addr 10.0.0.1
USAGE
}

die_usage() {
    printf 'error: %s\n\n' "$1" >&2
    usage >&2
    exit 2
}

# A path from the command line or the environment is relative to the caller's
# directory, not to the project root the script moves to.
absolute() {
    case $1 in
        /*) printf '%s' "$1" ;;
        *) printf '%s/%s' "$PWD" "$1" ;;
    esac
}

# Whole numbers without a leading zero: bash arithmetic reads 08 as bad octal.
is_count() {
    [[ $1 =~ ^[1-9][0-9]{0,4}$ ]]
}

is_index() {
    [[ $1 =~ ^(0|[1-9][0-9]{0,4})$ ]]
}

# The words of a command, each quoted so that the line can be pasted into bash.
print_words() {
    printf '%q' "$1"
    shift
    if [[ $# -gt 0 ]]; then printf ' %q' "$@"; fi
    printf '\n'
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
nproc=${NPROC_PER_NODE:-$default_devices}
nnodes=${NNODES:-$default_nodes}
node_rank=${NODE_RANK:-0}
master_addr=${MASTER_ADDR:-127.0.0.1}
master_port=${MASTER_PORT:-29500}
{%- if cookiecutter.target == 'both' %}
launcher=${LAUNCHER:-auto}
{%- endif %}
data=${DATA_DIR:+$(absolute "$DATA_DIR")}
data=${data:-$project_root/data}
output=${OUTPUT_DIR:+$(absolute "$OUTPUT_DIR")}
output=${output:-$project_root/output}
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
        --nproc | --nnodes | --node-rank | --master-addr | --master-port | --data | --output | --log-dir{% if cookiecutter.target == 'both' %} | --launcher{% endif %})
            [[ $# -ge 2 && -n $2 && $2 != --* ]] || die_usage "$1 needs a value"
            case $1 in
                --nproc) nproc=$2 ;;
                --nnodes) nnodes=$2 ;;
                --node-rank) node_rank=$2 ;;
                --master-addr) master_addr=$2 ;;
                --master-port) master_port=$2 ;;
{%- if cookiecutter.target == 'both' %}
                --launcher) launcher=$2 ;;
{%- endif %}
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

is_count "$nproc" || die_usage "--nproc must be a whole number from 1, not '$nproc'"
is_count "$nnodes" || die_usage "--nnodes must be a whole number from 1, not '$nnodes'"
is_index "$node_rank" || die_usage "--node-rank must be a whole number from 0, not '$node_rank'"
[[ $node_rank -lt $nnodes ]] || die_usage "--node-rank $node_rank is not below --nnodes $nnodes"
if ! is_count "$master_port" || [[ $master_port -gt 65535 ]]; then
    die_usage "--master-port must be a TCP port from 1 to 65535, not '$master_port'"
fi
{%- if cookiecutter.target in ('ascend', 'both') %}
stop_timeout=${RANK_STOP_TIMEOUT:-10}
is_index "$stop_timeout" || die_usage "RANK_STOP_TIMEOUT must be whole seconds, not '$stop_timeout'"
{%- endif %}
{%- if cookiecutter.target == 'both' %}
case $launcher in
    torchrun | per-rank) ;;
    # An NPU node has /dev/davinci0; torchrun's NCCL path is for GPUs.
    auto) if [[ -e /dev/davinci0 ]]; then launcher=per-rank; else launcher=torchrun; fi ;;
    *) die_usage "--launcher must be torchrun, per-rank or auto, not '$launcher'" ;;
esac
{%- endif %}
log_dir=${log_dir:-$output/logs}
world_size=$((nnodes * nproc))
train=(train.py --data_url "$data" --train_url "$output" ${train_args[@]+"${train_args[@]}"})
{% if cookiecutter.target in ('cuda', 'both') %}
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
{% endif %}
{%- if cookiecutter.target in ('ascend', 'both') %}
pids=()
alive=()
# Each rank leads its own process group (setsid), so that stopping it reaches
# whatever it started, such as CANN's operator-compile workers. Where setsid is
# missing, the rank process alone is signalled.
new_session=()
if command -v setsid >/dev/null 2>&1; then new_session=(setsid); fi

# Send a signal to rank i's process group, or to the rank alone without one.
signal_rank() {
    kill "-$2" -- "-${pids[$1]}" 2>/dev/null || kill "-$2" "${pids[$1]}" 2>/dev/null
}

# SIGTERM to every running rank, SIGKILL to what outlives RANK_STOP_TIMEOUT.
stop_ranks() {
    local i waited left
    for i in "${!pids[@]}"; do
        if [[ ${alive[i]} == true ]]; then signal_rank "$i" TERM || true; fi
    done
    for ((waited = 0; waited < stop_timeout * 5; waited++)); do
        left=false
        for i in "${!pids[@]}"; do
            if [[ ${alive[i]} == true ]] && signal_rank "$i" 0; then left=true; fi
        done
        [[ $left == true ]] || break
        sleep 0.2
    done
    for i in "${!pids[@]}"; do
        if [[ ${alive[i]} == true ]]; then
            signal_rank "$i" KILL || true
            wait "${pids[i]}" 2>/dev/null || true
            alive[i]=false
        fi
    done
}

# A rank forked but not yet started still runs these traps: only the launcher
# itself ($$ is its pid in every subshell too) may stop the ranks.
on_signal() {
    if [[ $BASHPID == "$$" ]]; then
        echo "run_8p.sh: $2; stopping every rank" >&2
        stop_ranks
    fi
    exit "$1"
}

# The environment of local rank $1, as torchrun sets it (RANK, LOCAL_RANK,
# WORLD_SIZE) and as Ascend's ModelZoo scripts do (RANK_ID, DEVICE_ID per node,
# RANK_SIZE), into env_words; its global rank into rank.
rank_env() {
    rank=$((node_rank * nproc + $1))
    env_words=("RANK=$rank" "LOCAL_RANK=$1" "WORLD_SIZE=$world_size"
        "LOCAL_WORLD_SIZE=$nproc" "RANK_ID=$rank" "DEVICE_ID=$1"
        "RANK_SIZE=$world_size" "MASTER_ADDR=$master_addr" "MASTER_PORT=$master_port")
}

run_per_rank() {
    local local_rank rank log status failed=-1 remaining=$nproc
    local -a env_words rank_dirs=()
    if [[ $dry_run == true ]]; then
        printf '# per-rank: %s processes on node %s of %s, world size %s\n' \
            "$nproc" "$node_rank" "$nnodes" "$world_size"
        printf 'cd %q\n. ./env.sh\n' "$project_root"
        for ((local_rank = 0; local_rank < nproc; local_rank++)); do
            rank_env "$local_rank"
            printf '# rank %s, log %q\n' "$rank" "$log_dir/rank_$rank/train.log"
            print_words "${env_words[@]}" "$python" "${train[@]}"
        done
        return 0
    fi

    cd "$project_root"
    # shellcheck source=/dev/null  # env.sh is linted on its own
    . ./env.sh
    # Everything that can fail comes first: once one rank runs, the launcher
    # must reach the loop below that watches it.
    for ((local_rank = 0; local_rank < nproc; local_rank++)); do
        rank_dirs+=("$log_dir/rank_$((node_rank * nproc + local_rank))")
    done
    mkdir -p "$output" "${rank_dirs[@]}"
    trap 'on_signal 130 interrupted' INT
    trap 'on_signal 129 "hung up"' HUP
    trap 'on_signal 143 terminated' TERM
    for ((local_rank = 0; local_rank < nproc; local_rank++)); do
        rank_env "$local_rank"
        log=$log_dir/rank_$rank/train.log
        # Local rank 0 is also shown here, so that a platform's job log has it.
        if [[ $local_rank -eq 0 ]]; then
            ${new_session[@]+"${new_session[@]}"} env "${env_words[@]}" "$python" "${train[@]}" \
                </dev/null > >(tee "$log") 2>&1 &
        else
            ${new_session[@]+"${new_session[@]}"} env "${env_words[@]}" "$python" "${train[@]}" \
                </dev/null >"$log" 2>&1 &
        fi
        pids[local_rank]=$!
        alive[local_rank]=true
        printf 'run_8p.sh: rank %s started (pid %s), log %s\n' "$rank" "$!" "$log"
    done

    # Poll rather than `wait -n`: bash before 5.1 cannot say which rank ended,
    # and a one-second tick is quick enough to stop the others.
    while [[ $remaining -gt 0 && $failed -lt 0 ]]; do
        for local_rank in "${!pids[@]}"; do
            if [[ ${alive[local_rank]} == false ]] || kill -0 "${pids[local_rank]}" 2>/dev/null; then
                continue
            fi
            status=0
            wait "${pids[local_rank]}" || status=$?
            alive[local_rank]=false
            remaining=$((remaining - 1))
            if [[ $status -ne 0 ]]; then
                failed=$local_rank
                break
            fi
        done
        if [[ $remaining -gt 0 && $failed -lt 0 ]]; then
            sleep 1 &
            wait $! || true
        fi
    done

    if [[ $failed -ge 0 ]]; then
        rank=$((node_rank * nproc + failed))
        log=$log_dir/rank_$rank/train.log
        stop_ranks
        printf 'error: rank %s (pid %s) exited with status %s; the other ranks were stopped\n' \
            "$rank" "${pids[failed]}" "$status" >&2
        if [[ -s $log ]]; then
            printf 'last lines of %s:\n' "$log" >&2
            tail -n 20 "$log" | sed 's/^/    /' >&2 || true
        else
            printf '%s is empty: the rank failed before it printed anything\n' "$log" >&2
        fi
        exit 1
    fi
    printf 'run_8p.sh: all %s ranks finished; logs in %s\n' "$nproc" "$log_dir"
}
{% endif %}
{%- if cookiecutter.target == 'both' %}
case $launcher in
    torchrun) run_torchrun ;;
    per-rank) run_per_rank ;;
esac
{%- elif cookiecutter.target == 'cuda' %}
run_torchrun
{%- else %}
run_per_rank
{%- endif %}
