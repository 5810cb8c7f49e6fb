# shellcheck shell=bash
# Sourced by launch_lib.sh, never run: which rank failed first, and whether it failed only
# as it left a finished job.

# root_cause LOG: "RANK LOCAL_RANK EXITCODE" of the rank that failed first in torchrun's
# report in LOG. torchrun's Root Cause is the failure with the earliest time, in whole
# seconds (torch/distributed/elastic/multiprocessing/errors: min over the timestamps), so
# ranks failing in the same second tie and it names the first it polled: maybe a rank that
# only lost its peer, or one stopped after it. So, in order: a rank killed by a signal of its
# own (SIGABRT, SIGSEGV; not SIGTERM, SIGKILL or SIGINT, which come from outside), a rank that
# exited 2 (train.py's own one-line error: a full disk, a bad option; its peers then exit 1 as
# their collective breaks), the Root Cause unless it was stopped (-15, -9, -2, 143, 137, 130),
# any other failure; else the Root Cause.
root_cause() {
    awk 'function stopped(c) { return c ~ /^(-15|-9|-2|143|137|130)$/ }
        /Root Cause/ { root = 1 }
        $1 == "rank" && $2 == ":" { n++; rank[n] = $3; local[n] = $5; sub(/[)].*/, "", local[n]); cause[n] = root }
        $1 == "exitcode" && $2 == ":" { code[n] = $3 }
        END {
            for (i = 1; i <= n; i++) {
                if (code[i] ~ /^-/ && !stopped(code[i]) && (!own || cause[i])) own = i
                if (code[i] == "2" && (!said || cause[i])) said = i
                if (!stopped(code[i]) && (!other || cause[i])) other = i
                if (cause[i] && !first) first = i
            }
            pick = own ? own : said ? said : other ? other : first ? first : n
            if (pick) print rank[pick], local[pick], code[pick]
        }' "$1"
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

# first_error LOG: ": <its first error line>" of a rank's log, for the launcher's own
# message: train.py's one "error:" line, else the last line of a traceback; nothing when the
# log holds neither. The pattern is POSIX (no \b): mawk, gawk and busybox awk read it alike.
first_error() {
    local line
    # Only a file's: a device (a log linked to /dev/full) may never end.
    [[ -f $1 ]] || return 0
    line=$(grep -m1 '^error: ' "$1" 2>/dev/null) ||
        line=$(awk '/^Traceback/ { tb = 1 } tb && /^[A-Za-z_.]+(Error|Exception|Interrupt)([^A-Za-z0-9_]|$)/ { print; exit }' "$1" 2>/dev/null) ||
        true
    if [[ -n $line ]]; then printf ': %s' "${line#error: }"; fi
}
