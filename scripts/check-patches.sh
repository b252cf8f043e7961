#!/usr/bin/env bash
# Verify the patch conventions (patches/README.md) on every patch in patches/series.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERIES_PROG="scripts/check-patches.sh" exec "${PYTHON:-python3}" -m tools.series check-patches "$@"
