#!/usr/bin/env bash
{%- set ms = cookiecutter.framework == 'mindspore' %}
{%- set spawner = 'msrun' if ms else 'torchrun' %}
# Train on every device of this node (and of other nodes): hands the job to this
# project's launcher for the machine it runs on. Run it from anywhere.
set -euo pipefail

usage() {
    cat <<USAGE
usage: scripts/run_8p.sh [--launcher NAME] [--cluster KIND] [LAUNCHER OPTIONS] [-- TRAIN_ARGS...]
       scripts/run_8p.sh --sweep [--cluster KIND] [SWEEP OPTIONS] [-- TRAIN_ARGS...]

  --launcher NAME   {{ spawner }}{% if cookiecutter.target != 'cuda' %} or ranktable{% endif %}, or auto (default: \$LAUNCHER, else auto: {% if cookiecutter.target == 'cuda' %}{{ spawner }}{% elif cookiecutter.target == 'ascend' %}ranktable{% else %}ranktable on
                    an Ascend node, where /dev/davinci0 exists, else {{ spawner }}{% endif %})
  --cluster KIND    read the job's shape from what its platform injects: a Kubernetes
                    operator's (gen job render: trainjob, pytorchjob, volcano, ascendjob)
                    or a ModelArts job's (modelarts; the default where MA_VJ_NAME is set)
  --sweep           run sweep.py's trials on this node instead (README: Tune it), continuing
                    the sweep the output holds; scripts/run_sweep.sh --help lists its options

The other options go to the launcher: scripts/run_<launcher>.sh --help lists them
(--nproc, --nnodes, --node-rank, --master-addr, --master-port, --join-timeout,
--data, --output, --log-dir, --dry-run, ...).

example, two nodes:
  node 0: scripts/run_8p.sh --nnodes 2 --node-rank 0 --master-addr 10.0.0.1
  node 1: scripts/run_8p.sh --nnodes 2 --node-rank 1 --master-addr 10.0.0.1
USAGE
}

project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_lib.sh
. "$project_root/scripts/launch_lib.sh"

launcher=${LAUNCHER:-auto} cluster='' sweep=false args=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --sweep) sweep=true && shift ;;
        --launcher=* | --cluster=*) set -- "${1%%=*}" "${1#*=}" "${@:2}"; continue ;;
        --launcher | --cluster)
            [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"
            printf -v "${1#--}" '%s' "$2"
            shift 2
            ;;
        -h | --help) usage; exit 0 ;;
        --) args+=("$@"); break ;;
        *) args+=("$1"); shift ;;
    esac
done
{%- if ms %}
# auto: msrun may stand in for the rank-table launcher (a ModelArts job without a table).
asked=$launcher
{%- endif %}

case $launcher in
    {{ spawner }}{% if cookiecutter.target != 'cuda' %} | ranktable{% endif %}) ;;
    auto) launcher={% if cookiecutter.target == 'cuda' %}{{ spawner }}{% elif cookiecutter.target == 'ascend' %}ranktable{% else %}$(if [[ -e /dev/davinci0 ]]; then echo ranktable; else echo {{ spawner }}; fi){% endif %} ;;
    *) die_usage "--launcher must be {{ spawner }}{% if cookiecutter.target != 'cuda' %}, ranktable{% endif %} or auto, not '$launcher'" ;;
esac

# A ModelArts job's containers alone have MA_VJ_NAME: its shape comes from the job.
if [[ -z $cluster && -n ${MA_VJ_NAME:-} ]]; then cluster=modelarts; fi

# ModelArts appends the job's inputs, outputs and hyperparameters to its command
# (--data_url=..., --epoch_size=...): what is not a launcher option goes to train.py.
split_platform_args() {
    local own=() train=() value_words="$job_options --worker-num --rank-table --chip --log-by"
    while [[ $# -gt 0 && $1 != -- ]]; do
        if [[ " $value_words " == *[[:space:]]"$1"[[:space:]]* && $# -ge 2 ]]; then
            own+=("$1" "$2")
            shift
        elif [[ " $value_words --dry-run --wait-table --bind-cores " == *[[:space:]]"${1%%=*}"[[:space:]]* ]]; then
            own+=("$1")
        else
            train+=("$1")
        fi
        shift
    done
    [[ $# -eq 0 ]] || shift
    args=(${own[@]+"${own[@]}"} -- ${train[@]+"${train[@]}"} "$@")
}

# A sweep in a ModelArts job: its nodes are counted (one only), its arguments split.
if [[ $sweep == true && $cluster == modelarts ]]; then
    split_platform_args ${args[@]+"${args[@]}"}
    exec bash "$project_root/scripts/run_sweep.sh" --nnodes "${MA_NUM_HOSTS:-${VC_WORKER_NUM:-1}}" "${args[@]}"
fi

# The job's shape as the operator or ModelArts describes it, as the launcher's options.
from=()
case $cluster in
    '') ;;
    trainjob | pytorchjob | volcano | ascendjob)
        # An AscendJob starts {% if ms %}MindSpore through msrun{% else %}PyTorch one process per device{% endif %}.
        if [[ $cluster == ascendjob ]]; then launcher={% if ms %}msrun{% else %}ranktable{% endif %}; fi
        # scripts/operators.py holds each operator's variables, with their sources.
        shape=$("${PYTHON:-python3}" "$project_root/scripts/operators.py" "$cluster" "$launcher") || exit 1
        mapfile -t from <<<"$shape"
        read -ra cleared <<<"${from[0]}"
        launcher=${cleared[0]} from=("${from[@]:1}")
        # The pod's variables that the processes started must not take for their own.
        unset "${cleared[@]:1}"
        if [[ $cluster == volcano && $launcher == ranktable ]]; then
            # Ascend Operator writes the job's table here; it says "initializing" until every pod is placed.
            from+=(--rank-table "${RANK_TABLE_FILE:-/user/serverid/devindex/config/hccl.json}" --wait-table)
        fi
        ;;
    modelarts)
        split_platform_args ${args[@]+"${args[@]}"}
        # A rank table from the job says the ranks: RANK_TABLE_FILE (ModelArts sets the directory
        # holding jobstart_hccl.json), else ModelArts' own path. scripts/modelarts.py waits for it
        # to say "completed" and finds this node in it as ModelArts' own launcher does.
        table=${RANK_TABLE_FILE:-/user/config/jobstart_hccl.json}
        if [[ $launcher != ranktable || (-z ${RANK_TABLE_FILE:-} && ! -e $table) ]]; then table=''; fi
{%- if ms %}
        # Without one, msrun's scheduler on node 0 brings the ranks together.
        if [[ $asked == auto && $launcher == ranktable && -z $table ]]; then launcher=msrun; fi
{%- endif %}
        shape=$("${PYTHON:-python3}" "$project_root/scripts/modelarts.py" "$default_devices" \
            ${table:+--table "$table"} -- "${args[@]}") || exit 1
        if [[ -n $shape ]]; then mapfile -t from <<<"$shape"; fi
        ;;
    *) die_usage "--cluster must be trainjob, pytorchjob, volcano, ascendjob or modelarts, not '$cluster'" ;;
esac
# A sweep: the job's shape checked (one node), then sweep.py on this node's devices.
if [[ $sweep == true ]]; then
    exec bash "$project_root/scripts/run_sweep.sh" ${from[@]+"${from[@]}"} ${args[@]+"${args[@]}"}
fi
[[ -f $project_root/scripts/run_$launcher.sh ]] || die "--cluster $cluster needs the $launcher launcher, which this project does not have"
# bash, not ./run_*.sh: uploads to a platform often lose the x bit. Given options win.
exec bash "$project_root/scripts/run_$launcher.sh" ${from[@]+"${from[@]}"} ${args[@]+"${args[@]}"}
