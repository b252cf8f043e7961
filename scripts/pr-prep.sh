#!/usr/bin/env bash
# Turn the series into the branches an upstream contributor pushes (one per PR of the stack,
# stacked, on the chosen vLLM base, signed off, linted) and write each PR's description.
# See docs/rebase-ci.md; --help for options.
set -euo pipefail
caller="$PWD"  # relative paths in arguments are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GDN_CALLER_CWD="$caller" SERIES_PROG="scripts/pr-prep.sh" exec "${PYTHON:-python3}" -m tools.rebase_ci pr-prep "$@"
