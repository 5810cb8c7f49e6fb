# shellcheck shell=bash
# Sourced by run_ranktable.sh, never run: start this node's ranks, one process per device,
# each in its own session and directory, and watch them; when one fails, stop the others.
# The variables (ranks, devices, ids, env_words, run_words, stop_timeout ...) are the launcher's.
# shellcheck disable=SC2154

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
    local pid waited
    for pid in ${pids[@]+"${pids[@]}"}; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for ((waited = 0; waited < stop_timeout * 5; waited++)); do
        kill -0 ${pids[@]+"${pids[@]/#/-}"} 2>/dev/null || break
        sleep 0.2
    done
    for pid in ${pids[@]+"${pids[@]}"}; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}

# start_rank I: local rank I in its own session and directory (where MindSpore and CANN
# leave per-process files), its output in its log there; local rank 0 is shown here too,
# so that a platform's job log has it.
start_rank() {
    local log
    log=$(rank_log "$1")
    if [[ $1 -eq 0 ]]; then exec > >(tee "$log"); else exec >"$log"; fi
    cd "${log%/*}" && exec setsid env "${env_words[@]}" "${run_words[@]}" </dev/null 2>&1
}

# run_ranks: start every local rank (rank_env I sets its environment and command), then
# wait; the first to fail stops the others and ends the launcher with its log.
run_ranks() {
    local i j status first reason left=$nproc
    pids=() logs=()
    trap 'echo "$launcher_name: interrupted; stopping every rank" >&2; stop_ranks; exit 130' INT
    trap 'echo "$launcher_name: terminated; stopping every rank" >&2; stop_ranks; exit 143' TERM
    for ((i = 0; i < nproc; i++)); do
        rank_env "$i"
        logs+=("$(rank_log "$i")")
        mkdir -p "${logs[i]%/*}" "$output"
        start_rank "$i" &
        pids+=("$!")
        printf '%s: rank %s on device %s (id %s here, pid %s), log %s\n' "$launcher_name" \
            "${ranks[i]}" "${devices[i]}" "${ids[i]}" "$!" "${logs[i]}"
    done
    # Poll rather than `wait -n`: bash before 5.1 cannot say which rank ended.
    while [[ $left -gt 0 ]]; do
        for i in "${!pids[@]}"; do
            if [[ -z ${pids[i]} ]] || kill -0 "${pids[i]}" 2>/dev/null; then continue; fi
            status=0
            wait "${pids[i]}" || status=$?
            pids[i]='' left=$((left - 1))
            [[ $status -eq 0 ]] && continue
            stop_ranks
            # 134: SIGABRT; rank 0's log, when it ran here, says whether the outputs were complete.
            first=$(for j in "${!ranks[@]}"; do if [[ ${ranks[j]} -eq 0 ]]; then echo "${logs[j]}"; fi; done)
            if [[ $status -eq 134 ]] && reason=$(aborted_after_training "${ranks[i]}" "${logs[i]}" "$first"); then
                die "$reason" "${logs[i]}"
            fi
            die "rank ${ranks[i]} exited with status $status$(first_error "${logs[i]}"); the other ranks were stopped; its log: ${logs[i]}" "${logs[i]}"
        done
        sleep 0.5
    done
}
