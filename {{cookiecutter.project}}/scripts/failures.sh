# shellcheck shell=bash
# Sourced by launch_lib.sh, never run: which rank failed first, and whether it failed only
# as it left a finished job.

# root_cause LOG: "RANK LOCAL_RANK EXITCODE" of the first failure torchrun reports in LOG: its
# Root Cause section (the Failures above it list the ranks torchrun stopped after it).
root_cause() {
    awk '/Root Cause/ { cause = 1; rank = ""; code = "" }
        cause && rank == "" && $1 == "rank" { rank = $3; local = $5; sub(/[)].*/, "", local) }
        cause && code == "" && $1 == "exitcode" { code = $3 }
        END { if (rank != "") print rank, local, code }' "$1"
}

# aborted_after_training RANK LOG [RANK0_LOG]: the reason for a rank killed by SIGABRT after
# its "rank N: training finished" line (src/runner.py), that is while it left the job; with
# whether rank 0, which writes the outputs, got as far (RANK0_LOG, when it ran on this node).
# Fails, printing nothing, for a rank that died before that line.
aborted_after_training() {
    grep -qx "rank $1: training finished" "$2" 2>/dev/null || return 1
    printf 'rank %s exited with SIGABRT after training finished' "$1"
    if [[ -z ${3:-} ]]; then
        printf '; its log: %s' "$2"
    elif grep -qx 'rank 0: training finished' "$3"; then
        printf ' (outputs complete); its log: %s' "$2"
    else
        printf '; rank 0 was stopped before its outputs were complete; its log: %s' "$2"
    fi
}
