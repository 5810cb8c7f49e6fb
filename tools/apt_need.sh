# shellcheck shell=bash
# Sourced by the tools that need Debian packages: apt_need PROGRAM:PACKAGE ... installs the
# packages whose program (a command name, or a path for a file) is missing, in one apt call.
apt_need() {
    local pair program need=()
    for pair in "$@"; do
        program=${pair%%:*}
        if [[ $program == /* ]]; then [[ -e $program ]] && continue
        else command -v "$program" >/dev/null 2>&1 && continue; fi
        need+=("${pair#*:}")
    done
    [ "${#need[@]}" -gt 0 ] || return 0
    echo "installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
}
