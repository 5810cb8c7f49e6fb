# shellcheck shell=sh
# Environment for training on this machine. Source it, do not run it:
#     . ./env.sh
# from sh, bash or zsh (POSIX constructs only). The run scripts source it for you.
# Every variable keeps a value you set before sourcing; sourcing never fails and never
# exits your shell, even under `set -eu`; what it cannot find it says on stderr.

# Sourced, or run? bash can tell; zsh says so in ZSH_EVAL_CONTEXT; sh (dash) runs it as
# "env.sh" but sources it under the caller's name.
_env_sourced=
if [ -n "${ZSH_EVAL_CONTEXT:-}" ]; then
    case $ZSH_EVAL_CONTEXT in *:file*) _env_sourced=1 ;; esac
elif [ -n "${BASH_VERSION:-}" ]; then
    (return 0 2>/dev/null) && _env_sourced=1
else
    case ${0##*/} in env.sh) ;; *) _env_sourced=1 ;; esac
fi
if [ -z "$_env_sourced" ]; then
    echo "env.sh: source this file (. ./env.sh); running it changes nothing" >&2
    exit 2
fi
unset _env_sourced

_env_note() {
    printf 'env.sh: %s\n' "$*" >&2
}
{% if cookiecutter.target in ('cuda', 'both') %}
# --- CUDA / NCCL ---------------------------------------------------------
# WARN reports real problems only; INFO floods every rank's log with topology
# dumps: set NCCL_DEBUG=INFO by hand while debugging, never leave it in.
: "${NCCL_DEBUG:=WARN}"
export NCCL_DEBUG
# NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) are set by the launchers of a
# multi-node job to the interface that routes to the master; set them yourself
# to override. NCCL_IB_DISABLE is left unset so that NCCL uses InfiniBand where
# it exists; set it to 1 only on nodes whose IB is absent or broken.
if [ ! -e /proc/driver/nvidia/version ]; then
    _env_note "no NVIDIA driver found (/proc/driver/nvidia/version); training will not see a GPU"
fi
{% endif %}
{%- if cookiecutter.target in ('ascend', 'both') %}
# --- Ascend / CANN -------------------------------------------------------
# CANN records where it was installed; ASCEND_HOME overrides, and the
# installer's default is the last guess.
: "${ASCEND_INSTALL_INFO:=/etc/Ascend/ascend_cann_install.info}"
if [ -z "${ASCEND_HOME:-}" ] && [ -r "$ASCEND_INSTALL_INFO" ]; then
    ASCEND_HOME=$(sed -n 's/^Install_Path=//p' "$ASCEND_INSTALL_INFO" 2>/dev/null | head -n 1)
fi
: "${ASCEND_HOME:=/usr/local/Ascend}"
export ASCEND_HOME

# The full toolkit first; nnae is the runtime-only package some images carry.
_env_cann=
for _env_candidate in "$ASCEND_HOME/ascend-toolkit/set_env.sh" "$ASCEND_HOME/nnae/set_env.sh"; do
    if [ -z "$_env_cann" ] && [ -r "$_env_candidate" ]; then
        _env_cann=$_env_candidate
    fi
done
if [ -n "$_env_cann" ]; then
    # CANN's script reads unset variables and runs failing commands: relax the
    # caller's strict mode around it, then restore every option: `set +o` prints the
    # commands that do, in every POSIX shell, but bash clears -e in $(...), so -e
    # comes back from $-.
    _env_flags=$-
    _env_options=$(set +o)
    set +eu
    # shellcheck disable=SC1090
    . "$_env_cann" || _env_note "$_env_cann returned an error; the CANN environment may be incomplete"
    eval "$_env_options"
    case $_env_flags in *e*) set -e ;; esac
    unset _env_flags _env_options
else
    _env_note "no CANN found under ASCEND_HOME=$ASCEND_HOME (ascend-toolkit/set_env.sh, nnae/set_env.sh); training will not see an NPU"
fi
unset _env_cann _env_candidate

# Time to wait for every rank to connect, in s (allowed 120-7200, CANN's default 120):
# ranks that load data or compile operators first arrive late. The launchers set it
# from --join-timeout.
: "${HCCL_CONNECT_TIMEOUT:=1200}"
# Time a collective may wait for a slow rank, in s (allowed up to 17340, CANN's
# default 1836; a multiple of 68, the unit CANN rounds down to).
: "${HCCL_EXEC_TIMEOUT:=1836}"
# 1: no HCCL whitelist. Set 0 only where the cluster configures one (HCCL_WHITELIST_FILE).
: "${HCCL_WHITELIST_DISABLE:=1}"
export HCCL_CONNECT_TIMEOUT HCCL_EXEC_TIMEOUT HCCL_WHITELIST_DISABLE
# HCCL_SOCKET_IFNAME and HCCL_IF_IP (the host NIC HCCL uses to set up a multi-node
# job) are set by the launchers to the interface that routes to the master; set
# them yourself only where another NIC must carry it.
{%- if cookiecutter.framework == 'pytorch' %}
# torch_npu: 1 queues operators asynchronously (faster); 2 also pipelines their
# dispatch (newer torch_npu). Set 0 only to get exact stack traces while debugging.
: "${TASK_QUEUE_ENABLE:=1}"
export TASK_QUEUE_ENABLE
{%- endif %}
# 3 = errors only: lower levels write many MB of plog per step and slow training.
: "${ASCEND_GLOBAL_LOG_LEVEL:=3}"
# 0 keeps CANN's logs in ~/ascend/log instead of interleaving them with train.py's.
: "${ASCEND_SLOG_PRINT_TO_STDOUT:=0}"
export ASCEND_GLOBAL_LOG_LEVEL ASCEND_SLOG_PRINT_TO_STDOUT
{% endif %}
unset -f _env_note
