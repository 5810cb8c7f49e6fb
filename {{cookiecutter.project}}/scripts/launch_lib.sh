# shellcheck shell=bash
# Sourced by the launch scripts, never run: argument checks and quoting{% if cookiecutter.target in ('ascend', 'both') %},
# and the per-rank launcher that starts, watches and stops one process per rank{% endif %}.

# A bad command line: the reason, then the sourcing script's usage; exit 2.
die_usage() {
    printf 'error: %s\n\n' "$1" >&2
    usage >&2
    exit 2
}

# A good command line that cannot run here (a missing file, a bad rank table).
die() {
    printf 'error: %s\n' "$1" >&2
    exit 1
}

# A path from the command line or the environment is relative to the caller's
# directory, not to the project root the script moves to.
absolute() {
    case $1 in
        /*) printf '%s' "$1" ;;
        *) printf '%s/%s' "$PWD" "$1" ;;
    esac
}

# data and output: $DATA_DIR and $OUTPUT_DIR (from the caller's directory), else
# the project's own data/ and output/. Flags parsed later may override them.
# shellcheck disable=SC2034  # set for the sourcing script
default_paths() {
    data=${DATA_DIR:+$(absolute "$DATA_DIR")}
    data=${data:-$project_root/data}
    output=${OUTPUT_DIR:+$(absolute "$OUTPUT_DIR")}
    output=${output:-$project_root/output}
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
{%- if cookiecutter.target in ('ascend', 'both') %}

# --- one process per rank ------------------------------------------------------
# start_rank starts each, watch_ranks waits for them all and stops the rest
# when one fails; a signal to the launcher stops them all.

launcher_name=${0##*/}
stop_timeout=${RANK_STOP_TIMEOUT:-10}
started=0
rank_pids=()
rank_alive=()
rank_ids=()
rank_logs=()
# Each rank leads its own process group (setsid), so that stopping it reaches
# whatever it started, such as CANN's operator-compile workers. Where setsid is
# missing, the rank process alone is signalled.
new_session=()
if command -v setsid >/dev/null 2>&1; then new_session=(setsid); fi

check_stop_timeout() {
    is_index "$stop_timeout" || die_usage "RANK_STOP_TIMEOUT must be whole seconds, not '$stop_timeout'"
}

# Send a signal to rank slot i's process group, or to the rank alone without one.
signal_rank() {
    kill "-$2" -- "-${rank_pids[$1]}" 2>/dev/null || kill "-$2" "${rank_pids[$1]}" 2>/dev/null
}

# SIGTERM to every running rank, SIGKILL to what outlives RANK_STOP_TIMEOUT.
stop_ranks() {
    local i waited left
    for i in "${!rank_pids[@]}"; do
        if [[ ${rank_alive[i]} == true ]]; then signal_rank "$i" TERM || true; fi
    done
    for ((waited = 0; waited < stop_timeout * 5; waited++)); do
        left=false
        for i in "${!rank_pids[@]}"; do
            if [[ ${rank_alive[i]} == true ]] && signal_rank "$i" 0; then left=true; fi
        done
        [[ $left == true ]] || break
        sleep 0.2
    done
    for i in "${!rank_pids[@]}"; do
        if [[ ${rank_alive[i]} == true ]]; then
            signal_rank "$i" KILL || true
            wait "${rank_pids[i]}" 2>/dev/null || true
            rank_alive[i]=false
        fi
    done
}

# A rank forked but not yet started still runs these traps: only the launcher
# itself ($$ is its pid in every subshell too) may stop the ranks.
on_signal() {
    if [[ $BASHPID == "$$" ]]; then
        echo "$launcher_name: $2; stopping every rank" >&2
        stop_ranks
    fi
    exit "$1"
}

# Call once, after everything that can fail before the first rank starts: from
# here on the launcher must reach watch_ranks.
trap_signals() {
    trap 'on_signal 130 interrupted' INT
    trap 'on_signal 129 "hung up"' HUP
    trap 'on_signal 143 terminated' TERM
}

# start_rank RANK DIR LOG SHOW COMMAND...: run COMMAND in DIR, its output in LOG
# and, with SHOW=true, here too (so that a platform's job log has one rank).
start_rank() {
    local rank=$1 dir=$2 log=$3 show=$4
    shift 4
    if [[ $show == true ]]; then
        { cd "$dir" && exec ${new_session[@]+"${new_session[@]}"} "$@"; } \
            </dev/null > >(tee "$log") 2>&1 &
    else
        { cd "$dir" && exec ${new_session[@]+"${new_session[@]}"} "$@"; } \
            </dev/null >"$log" 2>&1 &
    fi
    rank_pids[started]=$!
    rank_alive[started]=true
    rank_ids[started]=$rank
    rank_logs[started]=$log
    started=$((started + 1))
    printf '%s: rank %s started (pid %s), log %s\n' "$launcher_name" "$rank" "$!" "$log"
}

# Wait for every started rank. When one fails, stop the others, say which rank
# failed and show the end of its log, and exit 1.
watch_ranks() {
    local i status=0 failed=-1 remaining=$started log
    # Poll rather than `wait -n`: bash before 5.1 cannot say which rank ended,
    # and a one-second tick is quick enough to stop the others.
    while [[ $remaining -gt 0 && $failed -lt 0 ]]; do
        for i in "${!rank_pids[@]}"; do
            if [[ ${rank_alive[i]} == false ]] || kill -0 "${rank_pids[i]}" 2>/dev/null; then
                continue
            fi
            status=0
            wait "${rank_pids[i]}" || status=$?
            rank_alive[i]=false
            remaining=$((remaining - 1))
            if [[ $status -ne 0 ]]; then
                failed=$i
                break
            fi
        done
        if [[ $remaining -gt 0 && $failed -lt 0 ]]; then
            sleep 1 &
            wait $! || true
        fi
    done
    [[ $failed -ge 0 ]] || return 0

    log=${rank_logs[failed]}
    stop_ranks
    printf 'error: rank %s (pid %s) exited with status %s; the other ranks were stopped\n' \
        "${rank_ids[failed]}" "${rank_pids[failed]}" "$status" >&2
    if [[ -s $log ]]; then
        printf 'last lines of %s:\n' "$log" >&2
        tail -n 20 "$log" | sed 's/^/    /' >&2 || true
    else
        printf '%s is empty: the rank failed before it printed anything\n' "$log" >&2
    fi
    exit 1
}
{%- if cookiecutter.framework == 'mindspore' %}

# The CPU cores this launcher may use, one a line: its affinity list (0-3,8-11,
# as a container or taskset set it), else 0 to the online count - 1.
allowed_cores() {
    local list part core
    local -a parts
    list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status 2>/dev/null) || list=''
    [[ -n $list ]] || list=0-$(($(getconf _NPROCESSORS_ONLN) - 1))
    IFS=, read -r -a parts <<<"$list"
    for part in "${parts[@]}"; do
        for ((core = ${part%-*}; core <= ${part#*-}; core++)); do echo "$core"; done
    done
}

# core_slices N: the allowed cores in N equal slices, one a line as a taskset
# list (0-5 or 0-2,8-10); nothing when taskset is missing or there are fewer
# cores than N.
core_slices() {
    local width i core count=0 list prev start
    local -a cores
    if ! command -v taskset >/dev/null 2>&1; then
        echo "$launcher_name: no taskset here; --bind-cores is ignored" >&2
        return 0
    fi
    mapfile -t cores < <(allowed_cores)
    for core in "${cores[@]}"; do count=$((count + 1)); done
    width=$((count / $1))
    if [[ $width -lt 1 ]]; then
        echo "$launcher_name: $count cores for $1 ranks; --bind-cores is ignored" >&2
        return 0
    fi
    for ((i = 0; i < $1; i++)); do
        # Consecutive cores as one range, so that the lists stay short.
        list='' prev=-2 start=''
        for core in "${cores[@]:i*width:width}"; do
            if [[ $core -ne $((prev + 1)) ]]; then
                if [[ -n $start ]]; then list+=$(core_range "$start" "$prev"),; fi
                start=$core
            fi
            prev=$core
        done
        echo "$list$(core_range "$start" "$prev")"
    done
}

core_range() {
    if [[ $1 -eq $2 ]]; then printf '%s' "$1"; else printf '%s-%s' "$1" "$2"; fi
}
{%- endif %}
{%- endif %}
