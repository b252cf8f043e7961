#!/usr/bin/env bash
# Populate vllm/ with the pinned vLLM base (branch vllm-<version>) and the series branch
# gdn-ucache: from upstream git when reachable, else from the PyPI source release imported
# as a deterministic commit (sha in vllm.pin). Downloads are cached in $GDN_UCACHE_CACHE
# (default ~/.cache/gdn-ucache). Idempotent: an existing vllm/ is left as it is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SERIES_PROG="scripts/populate-vllm.sh" exec "${PYTHON:-python3}" -m tools.series populate "$@"
