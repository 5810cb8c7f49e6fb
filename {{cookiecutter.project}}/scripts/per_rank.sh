# shellcheck shell=bash
# Sourced by run_ranktable.sh, never run: start this node's ranks, one process per device,
# each in its own session and directory, and watch them; when one fails, stop the others.
# The variables (ranks, devices, ids, env_words, run_words, stop_timeout ...) are the launcher's.
# shellcheck disable=SC2034,SC2154

# rank_log I: local rank I's log. By rank: LOG_DIR/rank_N/train.log; by device, ModelZoo's
# LOG_DIR/<id>/train_<id>.log (its test/train_full_8p.sh writes train_${ASCEND_DEVICE_ID}.log).
rank_log() {
    if [[ $log_by == rank ]]; then
        printf '%s/rank_%s/train.log' "$log_dir" "${ranks[$1]}"
    else
        printf '%s/%s/train_%s.log' "$log_dir" "${ids[$1]}" "${ids[$1]}"
    fi
}

# SIGTERM to every rank's session, SIGKILL to what outlives RANK_STOP_TIMEOUT seconds.
stop_ranks() {
    local pid waited groups=()
    for pid in ${pids[@]+"${pids[@]}"}; do if [[ -n $pid ]]; then groups+=("-$pid"); fi; done
    [[ -n ${groups[0]:-} ]] || return 0
    kill -TERM -- "${groups[@]}" 2>/dev/null || true
    for ((waited = 0; waited < stop_timeout * 5; waited++)); do
        alive "${groups[@]}" || break
        sleep 0.2
    done
    kill -KILL -- "${groups[@]}" 2>/dev/null || true
}

# start_rank I: local rank I in its own session and directory (where MindSpore and CANN
# leave per-process files), its output in its log there, through scripts/rank.sh; local
# rank 0 is shown here too, so that a platform's job log has it.
start_rank() {
    local log
    log=$(rank_log "$1")
    if [[ $1 -eq 0 ]]; then exec > >(tee "$log"); else exec >"$log"; fi
    cd "${log%/*}" && exec setsid env "${env_words[@]}" "TRAIN_ATTEMPT=$attempt" \
        bash "$project_root/scripts/rank.sh" "${run_words[@]}" </dev/null 2>&1
}

# start_ranks: every local rank of this attempt (rank_env I sets its environment and command).
start_ranks() {
    local i
    pids=() logs=()
    for ((i = 0; i < nproc; i++)); do
        rank_env "$i"
        logs+=("$(rank_log "$i")")
        mkdir -p "${logs[i]%/*}" "$output"
        start_rank "$i" &
        pids+=("$!")
        printf '%s: rank %s on device %s (id %s here, pid %s), log %s\n' "$launcher_name" \
            "${ranks[i]}" "${devices[i]}" "${ids[i]}" "$!" "${logs[i]}"
    done
}

# wait_ranks: until every rank has ended; fails when one failed (failed: its index, status:
# its exit status), the others stopped. Polls: bash before 5.1 cannot say which rank ended.
wait_ranks() {
    local i left=$nproc
    while [[ $left -gt 0 ]]; do
        for i in "${!pids[@]}"; do
            if [[ -z ${pids[i]} ]] || kill -0 "${pids[i]}" 2>/dev/null; then continue; fi
            status=0
            wait "${pids[i]}" || status=$?
            pids[i]='' left=$((left - 1))
            [[ $status -eq 0 ]] && continue
            failed=$i
            stop_ranks
            return 1
        done
        sleep 0.5
    done
}

# run_ranks: start every local rank and wait; the first to fail stops the others, and the
# group starts again (restarts.sh) or the launcher ends with its log.
run_ranks() {
    local j first
    trap 'echo "$launcher_name: interrupted; stopping every rank" >&2; stop_ranks; exit 130' INT
    trap 'echo "$launcher_name: terminated; stopping every rank" >&2; stop_ranks; exit 143' TERM
    rank_records
    while true; do
        start_ranks
        if wait_ranks; then return 0; fi
        first=$(for j in "${!ranks[@]}"; do if [[ ${ranks[j]} -eq 0 ]]; then echo "${logs[j]}"; fi; done)
        next_attempt "${ranks[failed]}" "$status" "${logs[failed]}" "$first" "the other ranks were stopped" "${logs[@]}"
    done
}
