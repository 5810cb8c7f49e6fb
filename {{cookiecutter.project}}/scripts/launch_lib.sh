# shellcheck shell=bash
# Sourced by the launch scripts, never run: options, paths and the network interface of a
# multi-node job (restarts.sh: the watch over what a launcher starts, and its restarts).
# The options' variables (nproc, master_port ...) belong to the sourcing launcher:
# shellcheck disable=SC2034,SC2154

launcher_name=${0##*/}
# shellcheck source-path=SCRIPTDIR source=failures.sh
. "${BASH_SOURCE[0]%/*}/failures.sh"
# shellcheck source-path=SCRIPTDIR source=restarts.sh
. "${BASH_SOURCE[0]%/*}/restarts.sh"
# The defaults chosen when the project was generated.
default_devices={{ cookiecutter.devices_per_node | shell_quote }} default_nodes={{ cookiecutter.nnodes | shell_quote }}
# train.py's lines name the option a person gave: the launchers' --output, not --train_url.
export TRAIN_OUTPUT_FLAG=--output

# job_defaults PORT: the options every multi-process launcher shares, from the environment
# (NPROC_PER_NODE, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, JOIN_TIMEOUT, DATA_DIR ...).
job_defaults() {
    python=${PYTHON:-python3}
    nproc=${NPROC_PER_NODE:-$default_devices} nnodes=${NNODES:-$default_nodes}
    node_rank=${NODE_RANK:-0} master_addr=${MASTER_ADDR:-127.0.0.1} master_port=${MASTER_PORT:-$1}
    join_timeout=${JOIN_TIMEOUT:-600} max_restarts=${TRAIN_MAX_RESTARTS:-2} dry_run=false train_args=()
    data=${DATA_DIR:-} output=${OUTPUT_DIR:-} log_dir=${LOG_DIR:-}
}

# The value options of job_defaults' variables, which every multi-process launcher takes.
job_options="--nproc --nnodes --node-rank --master-addr --master-port --join-timeout --max-restarts --data --output --log-dir"

# parse_job PORT [OPTION...] -- ARGS...: job_defaults, then ARGS parsed for the shared options,
# the launcher's own value OPTIONs and --dry-run, and checked.
parse_job() {
    job_defaults "$1"
    shift
    value_options=$job_options flag_options=--dry-run
    while [[ $1 != -- ]]; do value_options+=" $1" && shift; done
    shift
    parse_options "$@"
    check_job_options
}

# After the options: paths from the caller's directory, logs under the output. Without --data
# or --output, train.py's own (the platform's or C2Net's, else ./data, ./output), never ours.
absolute_paths() {
    data=$(absolute "$data") output=$(absolute "$output")
    data_args=() && [[ -z $data ]] || data_args=(--data_url "$data")
    output_args=() && [[ -z $output ]] || output_args=(--train_url "$output")
    [[ -n $output ]] || output=$(cd "$project_root" && "$python" -m src.scaffold.run.preflight \
        --output-dir ${train_args[@]+"${train_args[@]}"}) || exit 2
    log_dir=$(absolute "${log_dir:-$output/logs}")
}

# A bad command line: the reason, then the sourcing script's usage; exit 2.
die_usage() { printf 'error: %s\n\n' "$1" >&2; usage >&2; exit 2; }

# die MESSAGE [LOG]: a good command line that cannot run here, or a failed job; LOG's end; exit 1.
die() {
    printf 'error: %s\n' "$1" >&2
    if [[ -f ${2:-} && -s $2 ]]; then tail -n 5 "$2" | sed 's/^/    /' >&2; fi
    exit 1
}

# A path given is relative to the caller's directory, not to the project root we move to.
absolute() { case $1 in /* | '') printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }

# Before any rank starts or a log is written: train.py's options and the output, checked once.
preflight() { TRAIN_RANKS=$nproc TRAIN_NODES=$nnodes "$python" -m src.scaffold.run.preflight ${data_args[@]+"${data_args[@]}"} ${output_args[@]+"${output_args[@]}"} ${train_args[@]+"${train_args[@]}"} || exit 2; }

# Whole numbers without a leading zero: bash arithmetic reads 08 as bad octal.
is_count() { [[ $1 =~ ^[1-9][0-9]{0,4}$ ]]; }
is_index() { [[ $1 =~ ^(0|[1-9][0-9]{0,4})$ ]]; }

# The words of a command, each quoted so that the line can be pasted into bash.
print_words() {
    printf '%q' "$1"
    shift
    if [[ $# -gt 0 ]]; then printf ' %q' "$@"; fi
    printf '\n'
}

# parse_options "$@": each --name in $value_options sets $name (dashes as underscores),
# each in $flag_options sets it to true; what follows -- goes to train_args.
parse_options() {
    local name
    while [[ $# -gt 0 ]]; do
        case $1 in
            --*=*) set -- "${1%%=*}" "${1#*=}" "${@:2}"; continue ;;
            -h | --help) usage; exit 0 ;;
            --) shift; train_args=("$@"); return 0 ;;
        esac
        name=${1#--}
        name=${name//-/_}
        if [[ " $value_options " == *" $1 "* ]]; then
            [[ $# -ge 2 && -n $2 && $2 != --* ]] || die_usage "$1 needs a value"
            printf -v "$name" '%s' "$2"
            shift 2
        elif [[ " $flag_options " == *" $1 "* ]]; then
            printf -v "$name" true
            shift
        else
            die_usage "unknown argument: $1"
        fi
    done
}

# The checks every multi-process launcher makes of the shared options.
check_job_options() {
    # auto: the GPUs or NPUs this node shows (src/scaffold/run/preflight.py --count), else 1.
    [[ $nproc != auto ]] || nproc=$(cd "$project_root" && "$python" -m src.scaffold.run.preflight --count) || exit 2
    is_count "$nproc" || die_usage "--nproc must be a whole number from 1, or auto, not '$nproc'"
    is_count "$nnodes" || die_usage "--nnodes must be a whole number from 1, not '$nnodes'"
    is_index "$node_rank" || die_usage "--node-rank must be a whole number from 0, not '$node_rank'"
    [[ $node_rank -lt $nnodes ]] || die_usage "--node-rank $node_rank is not below --nnodes $nnodes"
    is_count "$join_timeout" || die_usage "--join-timeout must be whole seconds, not '$join_timeout'"
    is_index "$max_restarts" || die_usage "--max-restarts must be a whole number from 0, not '$max_restarts'"
    if ! is_count "$master_port" || [[ $master_port -lt 1024 || $master_port -gt 65535 ]]; then
        die_usage "--master-port must be a TCP port from 1024 to 65535, not '$master_port'"
    fi
}

# Several nodes: the interface that routes to the master carries the job's traffic, and
# this host's address on it is the one the others dial (a hostname may resolve to
# 127.0.1.1, as Debian and Ubuntu set it up). Variables the user set are kept.
choose_interface() {
    local route
    route=$("$python" "$project_root/scripts/cluster.py" route "$master_addr" ${MA_CURRENT_IP:+"$MA_CURRENT_IP"} --wait "${join_timeout:-0}") || exit 1
    net_iface=${route% *}
    net_addr=${route#* }
    : "${GLOO_SOCKET_IFNAME:=$net_iface}" "${NCCL_SOCKET_IFNAME:=$net_iface}"
    : "${HCCL_SOCKET_IFNAME:=$net_iface}" "${HCCL_IF_IP:=$net_addr}"
    export GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME HCCL_SOCKET_IFNAME HCCL_IF_IP
}
