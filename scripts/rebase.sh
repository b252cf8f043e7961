#!/usr/bin/env bash
# Move the series onto another vLLM base: scripts/rebase.sh REF|VERSION (patch by patch,
# stops at the first conflict with patches/ untouched; prints git range-diff on success),
# or scripts/rebase.sh --continue / --abort after a conflict.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERIES_PROG="scripts/rebase.sh" exec "${PYTHON:-python3}" -m tools.series rebase "$@"
