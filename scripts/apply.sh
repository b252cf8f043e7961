#!/usr/bin/env bash
# Apply patches/series onto branch gdn-ucache in vllm/ (git am -3, idempotent), report with
# --check, or apply the vllm/ part of the series onto an installed vllm with --target DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERIES_PROG="scripts/apply.sh" exec "${PYTHON:-python3}" -m tools.series apply "$@"
