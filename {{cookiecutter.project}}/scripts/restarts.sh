# shellcheck shell=bash
# Sourced by launch_lib.sh, never run: the watch over what a launcher starts, each rank's end
# (scripts/rank.sh records it), and the restarts of a failed group: up to --max-restarts
# (TRAIN_MAX_RESTARTS, default 2) more attempts, each rerunning train.py's same command, which
# continues from the newest checkpoint; a configuration error (exit status 2) never restarts.
# The variables (log_dir, node_rank, max_restarts ...) belong to the sourcing launcher:
# shellcheck disable=SC2034,SC2154

attempt=0 rank_dir=''

# rank_records: a directory in memory (/dev/shm, else TMPDIR) until the launcher ends, where
# scripts/rank.sh keeps each rank's end and stderr's end: known even when a log is not (full disk).
rank_records() {
    local base=/dev/shm
    [[ -d $base && -w $base ]] || base=${TMPDIR:-/tmp}
    rank_dir=$(mktemp -d "$base/train-ranks.XXXXXX") || die "cannot make a directory under $base for the ranks' records"
    export TRAIN_RANK_DIR=$rank_dir
    trap 'rm -rf "$rank_dir"' EXIT
}

# rank_python DIR PYTHON: DIR/python, which runs a rank with PYTHON through scripts/rank.sh,
# for a launcher that starts the interpreter itself (a file that runs: /dev/shm may be noexec).
rank_python() {
    mkdir -p "$1"
    printf '#!/bin/sh\nexec bash %q %q "$@"\n' "$project_root/scripts/rank.sh" "$(command -v "$2")" >"$1/python"
    chmod +x "$1/python"
}

# first_failure ATTEMPT: "RANK LOCAL_RANK STATUS" of ATTEMPT's first failed rank, or of one that
# exited 2 (train.py said why: a full disk) when the first exited 1 (its collective broken).
first_failure() {
    awk -v a="$1" '$1 == a && $4 != 0 {
            if (!first) { first = $2 " " $3 " " $4; status = $4 }
            if ($4 == 2 && !said) said = $2 " " $3 " " $4
        }
        END { if (status == 1 && said) print said; else if (first) print first }' "$rank_dir/ends" 2>/dev/null || true
}

# ended STATUS: how a rank ended, in words: a signal by its name.
ended() {
    local name
    if [[ $1 -gt 128 ]] && name=$(kill -l "$1" 2>/dev/null); then
        printf 'was killed by SIG%s' "${name#SIG}"
    else
        printf 'exited with status %s' "$1"
    fi
}

# rank_tail ATTEMPT RANK: the end of that rank's stderr, kept in memory; written once the
# stream closes, which a process the rank started may hold a little after its end.
rank_tail() {
    local file=$rank_dir/tail_$1_$2 waited
    for ((waited = 0; waited < 25; waited++)); do
        if [[ -e $file || -z $rank_dir ]]; then break; fi
        sleep 0.2 || true
    done
    printf '%s' "$file"
}

# restartable STATUS: whether a group whose first failure ended with STATUS starts again.
restartable() { [[ $1 -ne 2 && $attempt -lt $max_restarts ]]; }

# restarting RANK STATUS: the next attempt, in one line.
restarting() {
    attempt=$((attempt + 1))
    printf '%s: rank %s %s; attempt %s of %s starts the ranks of node %s again, resuming from the newest checkpoint\n' \
        "$launcher_name" "$1" "$(ended "$2")" "$((attempt + 1))" "$((max_restarts + 1))" "$node_rank" >&2
}

# keep_logs FILE...: the logs of this attempt, kept from the next one's: moved to
# LOG_DIR/attempt_N/ (N counts from 0), each under its path in LOG_DIR.
keep_logs() {
    local file kept
    for file in "$@"; do
        [[ -e $file ]] || continue
        kept=$log_dir/attempt_$attempt/${file#"$log_dir"/}
        mkdir -p "${kept%/*}" && mv -f "$file" "$kept"
    done
}

# run_attempt RANKS LOG COMMAND...: this attempt of the job, watched (watch_job); its success
# ends the launcher, saying so (RANKS: what the launcher calls its ranks).
run_attempt() {
    export TRAIN_ATTEMPT=$attempt
    watch_job "${@:2}"
    [[ $job_status -eq 0 ]] || return 0
    printf '%s: all %s %s of node %s finished; logs in %s
' "$launcher_name" "$nproc" "$1" "$node_rank" "$log_dir"
    exit 0
}

# next_attempt RANK STATUS LOG FIRST_LOG STOPPED FILE...: after a failed attempt, whose rank
# RANK failed first with STATUS (LOG its log; FIRST_LOG rank 0's, when it ran here): the job's
# end, or its logs FILE... kept and the next attempt said.
next_attempt() {
    local reason
    # 134: SIGABRT; rank 0's log says whether the outputs were complete.
    if [[ $2 -eq 134 ]] && reason=$(aborted_after_training "$1" "$3" "$4"); then die "$reason" "$3"; fi
    job_status=1
    restartable "$2" || rank_failed "$1" "$2" "$3" "$5"
    keep_logs "${@:6}"
    restarting "$1" "$2"
}

# rank_failed RANK STATUS LOG STOPPED: the job's end, its first failed rank not restarted:
# how it ended, why (its log's error line, else its stderr's kept in memory), what was left.
rank_failed() {
    local why
    why="$(ended "$2")$(first_error "$3")"
    [[ $why == *:* ]] || why+=$(first_error "$(rank_tail "$attempt" "$1")")
    if [[ $2 -eq 2 ]]; then
        why+=" (a configuration error: not restarted)"
    else
        why+="; no restart left (attempt $((attempt + 1)) of $((max_restarts + 1)))"
    fi
    job_failed "rank $1 $why; $4; its log: $3" "$3"
}

# alive PID...: whether one of them (-PGID: a process of that group) is still there.
alive() { kill -0 -- "$@" 2>/dev/null; }  # bash's kill: true when one signal was sent

# watching: called as the job runs; fails where the job must stop now. The launchers' own.
watching() { :; }

# watch_job LOG COMMAND...: run COMMAND in its own session, its output kept in LOG and
# its stdout (the ranks' progress) shown too; its stderr (a launcher's tracebacks) stays
# in LOG. Until joined (a function of the launcher) says the job came together, the node
# waits at most --join-timeout; a signal, or that timeout, stops the whole session, as does
# watching's failure (a rank failed). Sets job_status to COMMAND's exit status (124 when the
# node gave up waiting, 1 when watching stopped it).
watch_job() {
    local log=$1 waited=0 stopping='' children=() targets=() waiting=()
    shift
    : >"$log"
    # Both streams append to LOG (O_APPEND: their lines never overwrite each other).
    # shellcheck disable=SC2094
    setsid "$@" </dev/null > >(tee -a "$log") 2>>"$log" &
    job_pid=$!
    trap 'stopping=130' INT; trap 'stopping=143' TERM; trap 'stopping=129' HUP
    while kill -0 "$job_pid" 2>/dev/null; do
        if [[ -z $stopping && $waited -ge $((join_timeout * 5)) ]] && ! joined; then stopping=124; fi
        if [[ -z $stopping ]] && ! watching; then stopping=1; fi
        if [[ -n $stopping ]]; then break; fi
        # A Ctrl-C kills the sleep too: under set -e that would end the node, the job left running.
        sleep 0.2 || true
        waited=$((waited + 1))
    done
    if [[ -n $stopping ]]; then
        # msrun starts each worker in a session of its own: its group first (msrun SIGKILLs
        # the other workers when one exits), then the children's.
        read -ra children 2>/dev/null <"/proc/$job_pid/task/$job_pid/children" || true
        targets=("-$job_pid" ${children[@]+"${children[@]/#/-}"})
        kill -TERM -- "${targets[@]}" 2>/dev/null || true
        # The ranks have 10 s to save. msrun's scheduler, in msrun's group (scripts/rank.sh
        # notes it), has nothing to save and outlives a SIGTERM by a timeout of its own: msrun
        # itself is waited for, not its group.
        waiting=("${targets[@]}")
        if [[ -s ${rank_dir:-}/scheduler ]]; then waiting=("$job_pid" "${targets[@]:1}"); fi
        for ((waited = 0; waited < 50; waited++)); do
            alive "${waiting[@]}" || break; sleep 0.2 || true
        done
        kill -KILL -- "${targets[@]}" 2>/dev/null || true
    fi
    job_status=0
    wait "$job_pid" || job_status=$?
    trap - INT TERM HUP
    if [[ -n $stopping ]]; then job_status=$stopping; fi
}

# job_failed MESSAGE [LOG]: a watched job's failure (the join timeout, a signal: their own).
job_failed() {
    if [[ $job_status -eq 124 ]]; then
        die "node $node_rank: the job did not come together at $master_addr:$master_port within --join-timeout $join_timeout s (is node 0 up, and is $master_addr reachable from here?); nothing was left running"
    fi
    if [[ $job_status -gt 128 ]]; then
        printf '%s: stopped by a signal; every process of this node was stopped\n' "$launcher_name" >&2
        exit "$job_status"
    fi
    die "$@"
}
