#!/usr/bin/env bash
# Regenerate patches/ (the .patch files and patches/series) from branch gdn-ucache in vllm/,
# deterministically: exporting an unchanged branch rewrites nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERIES_PROG="scripts/export.sh" exec "${PYTHON:-python3}" -m tools.series export "$@"
