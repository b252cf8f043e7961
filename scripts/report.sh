#!/usr/bin/env bash
# scripts/report.sh RESULT.json...: one paste-ready markdown table from the version matrix
# (version-matrix.json) and/or a bisect result (bisect-result.json).
set -euo pipefail
caller="$PWD"  # relative paths in arguments are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GDN_CALLER_CWD="$caller" SERIES_PROG="scripts/report.sh" exec "${PYTHON:-python3}" -m tools.rebase_ci report "$@"
