#!/usr/bin/env bash
# Run vLLM's own checks (ruff, ruff-format, typos, SPDX header, forbidden imports; vLLM's
# config and pinned versions) on the files the series changes, inside vllm/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERIES_PROG="scripts/lint-vllm.sh" exec "${PYTHON:-python3}" -m tools.series lint-vllm "$@"
