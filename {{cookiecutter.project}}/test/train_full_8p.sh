#!/usr/bin/env bash
# ModelZoo's full 8p run: test/train_full_8p.sh --data_path=DIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=modelzoo.sh
. "$(dirname "${BASH_SOURCE[0]}")/modelzoo.sh"
modelzoo_run full 8p "$@"
