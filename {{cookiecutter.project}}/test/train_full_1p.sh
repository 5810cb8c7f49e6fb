#!/usr/bin/env bash
# ModelZoo's full 1p run: test/train_full_1p.sh --data_path=DIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=modelzoo.sh
. "$(dirname "${BASH_SOURCE[0]}")/modelzoo.sh"
modelzoo_run full 1p "$@"
