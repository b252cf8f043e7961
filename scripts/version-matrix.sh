#!/usr/bin/env bash
# Judge the series on the pinned vLLM release and the releases before it (PyPI sdists, cached
# in $GDN_UCACHE_CACHE/sdist, imported as branches vllm-<version> in vllm/); print the
# version x patch matrix (applies / conflicts / fails tests) and write it as JSON + markdown.
# Exit 1 only if the pinned release fails. See docs/rebase-ci.md; --help for options.
set -euo pipefail
caller="$PWD"  # relative paths in arguments are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GDN_CALLER_CWD="$caller" SERIES_PROG="scripts/version-matrix.sh" exec "${PYTHON:-python3}" -m tools.rebase_ci matrix "$@"
