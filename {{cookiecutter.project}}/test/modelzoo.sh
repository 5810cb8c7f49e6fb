# shellcheck shell=bash
# Sourced by test/train_{full,performance}_{1p,8p}.sh, the entry points Ascend ModelZoo
# users expect: --data_path, per-rank logs under test/output/<ASCEND_DEVICE_ID>/, and
# ModelZoo's summary at the end. They run the project's own launchers.

# modelzoo_run full|performance 1p|8p "$@"
modelzoo_run() {
    local mode=$1 size=$2 data_path='' dry_run=() extra=() start log_dir summary
    shift 2
    for arg in "$@"; do
        case $arg in
            --data_path=*) data_path=${arg#*=} ;;
            --dry-run) dry_run=(--dry-run) ;;
            -h | --help) echo "usage: test/train_${mode}_${size}.sh --data_path=DIR [--dry-run]"; return 0 ;;
            *) echo "error: unknown argument: $arg (usage: --data_path=DIR [--dry-run])" >&2; return 2 ;;
        esac
    done
    [[ -n $data_path ]] || { echo "error: --data_path=DIR is required" >&2; return 2; }
    test_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    project_root=$(dirname "$test_dir")
    export ASCEND_DEVICE_ID=${ASCEND_DEVICE_ID:-0}
    # Performance: a fixed number of steps, timed ten times, so that the rate leaves out the
    # first steps' compiling even inside one epoch; full: the configured epochs.
    if [[ $mode == performance ]]; then
        local steps=${PERF_STEPS:-200}
        [[ $steps =~ ^[1-9][0-9]{0,8}$ ]] || { echo "error: PERF_STEPS must be a whole number of steps, not '$steps'" >&2; return 2; }
        extra=(--max_steps "$steps" --log_every "$((steps >= 10 ? steps / 10 : 1))")
    fi
    log_dir=$test_dir/output
    # Each run keeps its own checkpoints: a new run never overwrites another's outputs.
    output=$log_dir/$ASCEND_DEVICE_ID/checkpoints/$(date -u +%Y%m%d-%H%M%S)
    start=$(date +%s)
    if [[ $size == 1p ]]; then
        log=$log_dir/$ASCEND_DEVICE_ID/train_$ASCEND_DEVICE_ID.log
        mkdir -p "${log%/*}"
        DEVICE_ID=$ASCEND_DEVICE_ID bash "$project_root/scripts/run_1p.sh" "${dry_run[@]}" \
            --data "$data_path" --output "$output" -- "${extra[@]}" 2>&1 | tee "$log"
    else
        log=$log_dir/0/train_0.log
        bash "$project_root/scripts/run_8p.sh" --launcher ranktable --nproc 8 --log-by device \
            --log-dir "$log_dir" "${dry_run[@]}" --data "$data_path" --output "$output" -- "${extra[@]}"
    fi || return
    [[ -z ${dry_run[*]:-} ]] || return 0
    summary=("${PYTHON:-python3}" "$test_dir/summary.py" "$output" --rank-size "${size%p}" --e2e "$(($(date +%s) - start))")
    "${summary[@]}" --case-dir "$log_dir/$ASCEND_DEVICE_ID" --mode "$mode"
}
