# shellcheck shell=bash
# Environment for training on this machine. Source it, do not run it:
#     . ./env.sh
# The run scripts source it for you. Every variable keeps a value you set
# before sourcing; sourcing never fails and never exits your shell, even under
# `set -euo pipefail`; what it cannot find it says on stderr.

if ! (return 0 2>/dev/null); then
    echo "env.sh: source this file (. ./env.sh); running it changes nothing" >&2
    exit 2
fi

_env_note() {
    printf 'env.sh: %s\n' "$*" >&2
}
{% if cookiecutter.target in ('cuda', 'both') %}
# --- CUDA / NCCL ---------------------------------------------------------
# WARN reports real problems only; INFO floods every rank's log with topology
# dumps: set NCCL_DEBUG=INFO by hand while debugging, never leave it in.
: "${NCCL_DEBUG:=WARN}"
export NCCL_DEBUG
# NCCL_SOCKET_IFNAME is left to you: the right interface (eth0, ib0, bond0) is
# a property of the cluster, and a wrong guess makes multi-node jobs hang.
# NCCL_IB_DISABLE is left unset so that NCCL uses InfiniBand where it exists;
# set it to 1 only on nodes whose IB is absent or broken and NCCL hangs on it.
if [[ ! -e /proc/driver/nvidia/version ]]; then
    _env_note "no NVIDIA driver found (/proc/driver/nvidia/version); training will not see a GPU"
fi
{% endif %}
{%- if cookiecutter.target in ('ascend', 'both') %}
# --- Ascend / CANN -------------------------------------------------------
# CANN records where it was installed; ASCEND_HOME overrides, and the
# installer's default is the last guess.
: "${ASCEND_INSTALL_INFO:=/etc/Ascend/ascend_cann_install.info}"
if [[ -z ${ASCEND_HOME:-} && -r $ASCEND_INSTALL_INFO ]]; then
    ASCEND_HOME=$(sed -n 's/^Install_Path=//p' "$ASCEND_INSTALL_INFO" 2>/dev/null | head -n 1) || ASCEND_HOME=
fi
: "${ASCEND_HOME:=/usr/local/Ascend}"
export ASCEND_HOME

# The full toolkit first; nnae is the runtime-only package some images carry.
_env_cann=
for _env_candidate in "$ASCEND_HOME/ascend-toolkit/set_env.sh" "$ASCEND_HOME/nnae/set_env.sh"; do
    if [[ -r $_env_candidate ]]; then
        _env_cann=$_env_candidate
        break
    fi
done
if [[ -n $_env_cann ]]; then
    # CANN's script reads unset variables and runs failing commands: relax the
    # caller's strict mode around it, then put every flag back as it was.
    _env_flags=$-
    _env_pipefail=false
    if shopt -qo pipefail; then _env_pipefail=true; fi
    set +eu +o pipefail
    # shellcheck disable=SC1090
    if ! . "$_env_cann"; then
        _env_note "$_env_cann returned an error; the CANN environment may be incomplete"
    fi
    case $_env_flags in *e*) set -e ;; *) set +e ;; esac
    case $_env_flags in *u*) set -u ;; *) set +u ;; esac
    if [[ $_env_pipefail == true ]]; then set -o pipefail; else set +o pipefail; fi
    unset _env_flags _env_pipefail
else
    _env_note "no CANN found under ASCEND_HOME=$ASCEND_HOME (ascend-toolkit/set_env.sh, nnae/set_env.sh); training will not see an NPU"
fi
unset _env_cann _env_candidate

# Time to wait for every rank to connect, in s (allowed 120-7200, CANN's
# default 120): ranks that load data or compile operators first arrive late.
: "${HCCL_CONNECT_TIMEOUT:=1200}"
# Time a collective may wait for a slow rank, in s (allowed up to 17340, CANN's
# default 1836; a multiple of 68, the unit CANN rounds down to).
: "${HCCL_EXEC_TIMEOUT:=1836}"
export HCCL_CONNECT_TIMEOUT HCCL_EXEC_TIMEOUT
# 3 = errors only: lower levels write many MB of plog per step and slow training.
: "${ASCEND_GLOBAL_LOG_LEVEL:=3}"
# 0 keeps CANN's logs in ~/ascend/log instead of interleaving them with train.py's.
: "${ASCEND_SLOG_PRINT_TO_STDOUT:=0}"
export ASCEND_GLOBAL_LOG_LEVEL ASCEND_SLOG_PRINT_TO_STDOUT
{% endif %}
unset -f _env_note
