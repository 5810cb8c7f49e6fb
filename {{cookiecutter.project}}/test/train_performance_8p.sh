#!/usr/bin/env bash
# ModelZoo's performance 8p run: test/train_performance_8p.sh --data_path=DIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=modelzoo.sh
. "$(dirname "${BASH_SOURCE[0]}")/modelzoo.sh"
modelzoo_run performance 8p "$@"
