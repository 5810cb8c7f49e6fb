#!/usr/bin/env bash
# One rank as the launchers start it: COMMAND ARGS... (train.py under its interpreter), its
# stderr also kept, the last lines, in TRAIN_RANK_DIR (memory: /dev/shm), and its end recorded
# there, so that the launcher can say which rank failed first, how, and why, even when the
# rank's log could not be written (a full disk). Without TRAIN_RANK_DIR it is COMMAND alone.
# The rank's end: "ATTEMPT RANK LOCAL_RANK STATUS" appended to TRAIN_RANK_DIR/ends, in the order
# the ranks ended; its stderr's end: TRAIN_RANK_DIR/tail_ATTEMPT_RANK, once the stream closes.
# A rank that said why it stops (train.py's one line, exit status 2) makes the file
# TRAIN_RANK_SAID first: stopped by its launcher on its way out, its end is still recorded as 2.
set -u

dir=${TRAIN_RANK_DIR:-}
[[ -n $dir ]] || exec "$@"
# msrun's scheduler runs the same command: it is no rank, and holds nothing to save. Its pid
# (exec keeps it) in TRAIN_RANK_DIR/scheduler: a stopped job does not wait for it.
if [[ ${MS_ROLE:-} == MS_SCHED ]]; then
    printf '%s\n' "$$" >"$dir/scheduler"
    exec "$@"
fi
# The attempt: the launcher's count (torchrun's own restarts, where used, count too).
attempt=${TRAIN_ATTEMPT:-${TORCHELASTIC_RESTART_COUNT:-0}}
rank=${RANK:-${RANK_ID:-0}} local_rank=${LOCAL_RANK:-${DEVICE_ID:-0}}
tail=$dir/tail_${attempt}_$rank
export TRAIN_RANK_SAID=$dir/said_${attempt}_$rank

# The stream goes on to where stderr went (its log; a failed write there is skipped) and
# into a pipe whose last lines are kept. The launchers' signals reach this process group:
# the keepers ignore them and end with the stream.
exec 3>&2
exec 4> >(
    trap '' INT TERM HUP
    tee /dev/fd/5 5>&1 >&3 2>/dev/null | tail -n 60 >"$tail.part"
    mv -f "$tail.part" "$tail"
)
exec 3>&-
# This waits for the rank, which handles the signals itself; then ends as it did.
trap : INT TERM HUP
status=0
"$@" 2>&4 4>&- || status=$?
exec 4>&-
if [[ $status -ne 0 && -e $TRAIN_RANK_SAID ]]; then status=2; fi
printf '%s %s %s %s\n' "$attempt" "$rank" "$local_rank" "$status" >>"$dir/ends"
if [[ $status -gt 128 && $status -lt 160 ]]; then
    trap - INT TERM HUP
    kill -n "$((status - 128))" "$$"
fi
exit "$status"
