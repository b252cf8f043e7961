#!/usr/bin/env bash
# Offline check of the Dockerfile's install step (no Docker here): in a cached virtualenv with
# the real vllm wheel of vllm.pin, run the same `apply.sh --target` step against its
# site-packages, import every module the series touches, parse the served command with the
# patched `vllm serve`, and run the series' CPU tests. Cache: $GDN_UCACHE_CACHE
# (default ~/.cache/gdn-ucache); the first run downloads ~4 GB (see docs/container.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CHECK_PROG="scripts/check-container-install.sh" exec "${PYTHON:-python3}" -m tools.container check-install "$@"
